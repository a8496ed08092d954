package main

import (
	"fmt"
	"io"
	"net"
)

// demoTFGRPCAddr is where a TF Serving gRPC client dials in the demo: TF Serving's own
// gRPC port, served by the proxy's TF gRPC listener.
const demoTFGRPCAddr = "localhost:8500"

// demoPythonClient is the client a TF Serving user already has: tensorflow-serving-api's
// stub and tf.make_tensor_proto, unchanged but for the address. %s is the address.
const demoPythonClient = `pip install tensorflow-serving-api
python3 - <<'EOF'
import grpc, tensorflow as tf
from tensorflow_serving.apis import predict_pb2, prediction_service_pb2_grpc
stub = prediction_service_pb2_grpc.PredictionServiceStub(grpc.insecure_channel("%s"))
request = predict_pb2.PredictRequest()
request.model_spec.name = "half_plus_two"
request.inputs["x"].CopyFrom(tf.make_tensor_proto([1.0, 2.0, 5.0], dtype=tf.float32))
response = stub.Predict(request, 10.0)  # 10 s deadline
print(tf.make_ndarray(response.outputs["y"]))  # [2.5 3.  4.5]
EOF`

// printDemoGRPC tells the user about the gRPC side: the mock's v2 gRPC port and a TF
// Serving Python client for the TF gRPC address tfGRPC.
func printDemoGRPC(w io.Writer, kind string, mockGRPC net.Addr, tfGRPC string) {
	fmt.Fprintf(w, "\ngRPC: TF Serving's PredictionService on %s, in front of the mock's\n", tfGRPC)
	fmt.Fprintf(w, "inference.GRPCInferenceService (%s) on %s. A TF Serving Python client, as is\n", kind, clientAddr(mockGRPC))
	// Not indented like the curl lines: the here-document must paste as is.
	fmt.Fprintf(w, "(paste into a shell):\n\n%s\n", fmt.Sprintf(demoPythonClient, tfGRPC))
}

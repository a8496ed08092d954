"""KServe custom models for the interop run (test/interop/README.md).

Each declares its tensors (get_input_types / get_output_types), which
KServe publishes as v2 metadata: TF Serving's parser needs the input
dtypes, and KServe's built-in predictors publish none.

    python test/interop/kserve/server.py   # HTTP on 8000 (Triton's port), gRPC on 8001
"""
import numpy as np
from kserve import InferOutput, InferRequest, InferResponse, Model, ModelServer


class _Model(Model):
    inputs: list = []
    outputs: list = []

    def __init__(self, name: str):
        super().__init__(name)
        self.ready = True

    def get_input_types(self):
        return self.inputs

    def get_output_types(self):
        return self.outputs

    def _tensors(self, payload: InferRequest) -> dict:
        return {i.name: i.as_numpy() for i in payload.inputs}

    def _respond(self, payload: InferRequest, outputs: dict) -> InferResponse:
        spec = {o["name"]: o["datatype"] for o in self.outputs}
        out = []
        for name, value in outputs.items():
            o = InferOutput(name=name, shape=list(value.shape), datatype=spec[name])
            o.set_numpy(value)
            out.append(o)
        return InferResponse(model_name=self.name, infer_outputs=out, response_id=payload.id)


class HalfPlusTwo(_Model):
    inputs = [{"name": "x", "datatype": "FP32", "shape": [-1]}]
    outputs = [{"name": "y", "datatype": "FP32", "shape": [-1]}]

    def predict(self, payload, headers=None, response_headers=None):
        x = self._tensors(payload)["x"].astype(np.float32)
        return self._respond(payload, {"y": (np.float32(0.5) * x + np.float32(2)).astype(np.float32)})


class Simple(_Model):
    inputs = [{"name": n, "datatype": "INT32", "shape": [-1, 16]} for n in ("INPUT0", "INPUT1")]
    outputs = [{"name": n, "datatype": "INT32", "shape": [-1, 16]} for n in ("OUTPUT0", "OUTPUT1")]

    def predict(self, payload, headers=None, response_headers=None):
        t = self._tensors(payload)
        a, b = t["INPUT0"].astype(np.int32), t["INPUT1"].astype(np.int32)
        return self._respond(payload, {"OUTPUT0": a + b, "OUTPUT1": a - b})


class BytesEcho(_Model):
    inputs = [{"name": "text", "datatype": "BYTES", "shape": [-1]}]
    outputs = [{"name": n, "datatype": "BYTES", "shape": [-1]} for n in ("echo", "echo_bytes")]

    def predict(self, payload, headers=None, response_headers=None):
        text = self._tensors(payload)["text"]
        flat = [v if isinstance(v, bytes) else str(v).encode() for v in text.reshape(-1)]
        return self._respond(payload, {
            "echo": np.array(flat, dtype=np.object_).reshape(text.shape),
            "echo_bytes": np.array([v[::-1] for v in flat], dtype=np.object_).reshape(text.shape),
        })


if __name__ == "__main__":
    ModelServer(http_port=8000, grpc_port=8001).start(
        [HalfPlusTwo("half_plus_two"), Simple("simple"), BytesEcho("bytes_echo")])

package main

// tfGRPCBindings are the flags of TF Serving's gRPC API (PredictionService,
// ModelService): the answer encoding for every command that translates
// it, and, with listener, the standalone TF gRPC listener and the v2
// server's gRPC address it calls.
func tfGRPCBindings(o *servingConfig, listener bool) []binding {
	b := &o.bridge
	bs := []binding{
		boolFlag(&b.TFGRPCTensorContent, "tf-grpc-tensor-content", "TF gRPC answers carry their values in tensor_content, as TF Serving's --enable_serialization_as_tensor_content does, instead of its default typed fields (float_val, int_val, string_val ...), which official clients read."),
		int64Flag(&b.TFGRPCDefaultVersion, "tf-grpc-default-version", "The model_spec.version TF gRPC answers carry when neither the request, the model map's label nor the v2 server names a numeric version (KServe and MLServer often give none; TF Serving always sets one); -1 leaves it unset (0 to a TF client)."),
	}
	if listener {
		bs = append(bs,
			addrFlag(&o.addrs.TFGRPC, "tf-grpc-addr", "Address of the TF gRPC listener (h2c, TF Serving's port is 8500): tensorflow.serving.PredictionService and ModelService calls translated to the v2 server's gRPC port (--backend-grpc); empty turns it off.", false, true),
			stringFlag(&b.TFGRPCBackend, "backend-grpc", "The v2 server's gRPC address, host:port (Triton 8001, KServe and MLServer 8081), plaintext HTTP/2; required by --tf-grpc-addr. Model-map servers give theirs with grpc:."),
		)
	}
	return bs
}

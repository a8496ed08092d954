"""bytes_echo: echo is the input, echo_bytes each element's bytes reversed."""
import numpy as np
import triton_python_backend_utils as pb_utils


class TritonPythonModel:
    def execute(self, requests):
        responses = []
        for request in requests:
            text = pb_utils.get_input_tensor_by_name(request, "text").as_numpy()
            rev = np.array([bytes(v)[::-1] for v in text.reshape(-1)], dtype=np.object_).reshape(text.shape)
            responses.append(pb_utils.InferenceResponse(output_tensors=[
                pb_utils.Tensor("echo", text.astype(np.object_)),
                pb_utils.Tensor("echo_bytes", rev),
            ]))
        return responses

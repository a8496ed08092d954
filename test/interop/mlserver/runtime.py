"""MLServer custom runtime for the interop models (test/interop/README.md).

The workflow puts this folder on PYTHONPATH; each model's model-settings.json
names its class and declares its tensors, which MLServer publishes as v2
metadata."""
import numpy as np
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


def _inputs(payload: InferenceRequest) -> dict:
    return {i.name: NumpyCodec.decode_input(i) for i in payload.inputs}


class HalfPlusTwo(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        x = _inputs(payload)["x"].astype(np.float32)
        y = (np.float32(0.5) * x + np.float32(2)).astype(np.float32)
        return InferenceResponse(model_name=self.name, id=payload.id,
                                 outputs=[NumpyCodec.encode_output("y", y)])


class Simple(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        t = _inputs(payload)
        a, b = t["INPUT0"].astype(np.int32), t["INPUT1"].astype(np.int32)
        return InferenceResponse(model_name=self.name, id=payload.id, outputs=[
            NumpyCodec.encode_output("OUTPUT0", a + b),
            NumpyCodec.encode_output("OUTPUT1", a - b),
        ])


class BytesEcho(MLModel):
    async def load(self) -> bool:
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        text = _inputs(payload)["text"]
        flat = [v if isinstance(v, bytes) else str(v).encode() for v in text.reshape(-1)]
        echo = np.array(flat, dtype=np.object_).reshape(text.shape)
        rev = np.array([v[::-1] for v in flat], dtype=np.object_).reshape(text.shape)
        return InferenceResponse(model_name=self.name, id=payload.id, outputs=[
            NumpyCodec.encode_output("echo", echo),
            NumpyCodec.encode_output("echo_bytes", rev),
        ])

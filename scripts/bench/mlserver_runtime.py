"""An MLServer runtime that runs an ONNX model with ONNX Runtime (one intra-op thread, as the
platform's t1 variants): the Python serving peer of the serving benchmark
(`scripts/bench/serving.py --peer mlserver`). Inputs and outputs are V2 tensors by name."""

import numpy as np
import onnxruntime as ort
from mlserver import MLModel
from mlserver.codecs import NumpyCodec
from mlserver.types import InferenceRequest, InferenceResponse


class OnnxModel(MLModel):
    async def load(self) -> bool:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(
            self.settings.parameters.uri, options, providers=["CPUExecutionProvider"]
        )
        self._outputs = [o.name for o in self._session.get_outputs()]
        return True

    async def predict(self, payload: InferenceRequest) -> InferenceResponse:
        feeds = {
            i.name: NumpyCodec.decode_input(i).astype(np.float32) for i in payload.inputs
        }
        results = self._session.run(self._outputs, feeds)
        return InferenceResponse(
            model_name=self.name,
            outputs=[
                NumpyCodec.encode_output(name, value) for name, value in zip(self._outputs, results)
            ],
        )

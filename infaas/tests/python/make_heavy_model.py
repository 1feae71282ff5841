"""Writes a slow copy of zoo/digits-mlp-l.onnx: the same answers (so the same accuracy), with
K extra pairs of MatMuls that widen the 64 inputs to 4,096 and narrow them back exactly (an
identity embedding and its transpose) before the network. A model that saturates this
machine's cores at about a hundred rows per second, for the overload test.

usage: make_heavy_model.py ZOO_DIR OUT.onnx [K]
"""

import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

zoo, out = sys.argv[1], sys.argv[2]
k = int(sys.argv[3]) if len(sys.argv) > 3 else 900
WIDTH = 4096
model = onnx.load(f"{zoo}/digits-mlp-l.onnx")
graph = model.graph
wide = np.zeros((64, WIDTH), dtype=np.float32)
wide[:, :64] = np.eye(64, dtype=np.float32)
graph.initializer.extend(
    [numpy_helper.from_array(wide, "heavy_wide"), numpy_helper.from_array(wide.T.copy(), "heavy_narrow")]
)
# The network's first node reads the graph input: feed it the chain's output instead.
source = graph.input[0].name
first = graph.node[0]
cast = helper.make_node("Cast", [source], ["heavy_in"], to=onnx.TensorProto.FLOAT)
chain = [cast]
prev = "heavy_in"
for i in range(k):
    chain.append(helper.make_node("MatMul", [prev, "heavy_wide"], [f"heavy_w{i}"]))
    chain.append(helper.make_node("MatMul", [f"heavy_w{i}", "heavy_narrow"], [f"heavy_n{i}"]))
    prev = f"heavy_n{i}"
for node in graph.node:
    for j, name in enumerate(node.input):
        if name == source:
            node.input[j] = prev
nodes = chain + list(graph.node)
del graph.node[:]
graph.node.extend(nodes)
onnx.checker.check_model(model)
onnx.save(model, out)

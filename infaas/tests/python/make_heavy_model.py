"""Writes a slow copy of zoo/digits-mlp-l.onnx: the same answers (so the same accuracy), with
K extra pairs of MatMuls that widen the 64 inputs to 4,096 and narrow them back exactly (an
identity embedding and its transpose) before the network. A model that saturates this
machine's cores at about a hundred rows per second, for the overload test.

With ROWS above 1, each query's rows are tiled ROWS times before the chain and the first
copy taken after it: the same answers, with MatMuls large enough (ROWS x 64 x 4,096) that more
intra-op threads speed them up (a chain of single-row MatMuls is dominated by the threads'
hand-offs), for the vertical-scaling test.

usage: make_heavy_model.py ZOO_DIR OUT.onnx [K] [ROWS]
"""

import sys

import numpy as np
import onnx
from onnx import helper, numpy_helper

zoo, out = sys.argv[1], sys.argv[2]
k = int(sys.argv[3]) if len(sys.argv) > 3 else 900
rows = int(sys.argv[4]) if len(sys.argv) > 4 else 1
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
if rows > 1:
    graph.initializer.extend(
        [
            numpy_helper.from_array(np.array([rows, 1], dtype=np.int64), "heavy_repeats"),
            numpy_helper.from_array(np.array([0], dtype=np.int64), "heavy_zero"),
            numpy_helper.from_array(np.array([1], dtype=np.int64), "heavy_one"),
        ]
    )
    chain.append(helper.make_node("Tile", [prev, "heavy_repeats"], ["heavy_tiled"]))
    chain.append(helper.make_node("Shape", [prev], ["heavy_shape"]))
    chain.append(helper.make_node("Slice", ["heavy_shape", "heavy_zero", "heavy_one"], ["heavy_n"]))
    prev = "heavy_tiled"
for i in range(k):
    chain.append(helper.make_node("MatMul", [prev, "heavy_wide"], [f"heavy_w{i}"]))
    chain.append(helper.make_node("MatMul", [f"heavy_w{i}", "heavy_narrow"], [f"heavy_n{i}"]))
    prev = f"heavy_n{i}"
if rows > 1:
    chain.append(helper.make_node("Slice", [prev, "heavy_zero", "heavy_n", "heavy_zero"], ["heavy_first"]))
    prev = "heavy_first"
for node in graph.node:
    for j, name in enumerate(node.input):
        if name == source:
            node.input[j] = prev
nodes = chain + list(graph.node)
del graph.node[:]
graph.node.extend(nodes)
onnx.checker.check_model(model)
onnx.save(model, out)

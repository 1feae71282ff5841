from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.node_run_view import NodeRunView
    from ..models.pipeline_infer_response_outputs_item import PipelineInferResponseOutputsItem


T = TypeVar("T", bound="PipelineInferResponse")


@_attrs_define
class PipelineInferResponse:
    """The answer to a pipeline query.

    Attributes:
        accuracy (float): Estimated accuracy of this answer: the product of the accuracies of the model nodes
            that ran, each weighted by the share of rows it ran on.
        latency_ms (float):
        nodes (list[NodeRunView]):
        outputs (list[PipelineInferResponseOutputsItem]):
        pipeline (str):
        slo_ms (float | None | Unset): The end-to-end SLO the query ran under (the pipeline's or the query's override).
    """

    accuracy: float
    latency_ms: float
    nodes: list[NodeRunView]
    outputs: list[PipelineInferResponseOutputsItem]
    pipeline: str
    slo_ms: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        accuracy = self.accuracy

        latency_ms = self.latency_ms

        nodes = []
        for nodes_item_data in self.nodes:
            nodes_item = nodes_item_data.to_dict()
            nodes.append(nodes_item)

        outputs = []
        for outputs_item_data in self.outputs:
            outputs_item = outputs_item_data.to_dict()
            outputs.append(outputs_item)

        pipeline = self.pipeline

        slo_ms: float | None | Unset
        if isinstance(self.slo_ms, Unset):
            slo_ms = UNSET
        else:
            slo_ms = self.slo_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "accuracy": accuracy,
                "latency_ms": latency_ms,
                "nodes": nodes,
                "outputs": outputs,
                "pipeline": pipeline,
            }
        )
        if slo_ms is not UNSET:
            field_dict["slo_ms"] = slo_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.node_run_view import NodeRunView  # noqa: PLC0415
        from ..models.pipeline_infer_response_outputs_item import PipelineInferResponseOutputsItem  # noqa: PLC0415

        d = dict(src_dict)
        accuracy = d.pop("accuracy")

        latency_ms = d.pop("latency_ms")

        nodes = []
        _nodes = d.pop("nodes")
        for nodes_item_data in _nodes:
            nodes_item = NodeRunView.from_dict(nodes_item_data)

            nodes.append(nodes_item)

        outputs = []
        _outputs = d.pop("outputs")
        for outputs_item_data in _outputs:
            outputs_item = PipelineInferResponseOutputsItem.from_dict(outputs_item_data)

            outputs.append(outputs_item)

        pipeline = d.pop("pipeline")

        def _parse_slo_ms(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        slo_ms = _parse_slo_ms(d.pop("slo_ms", UNSET))

        pipeline_infer_response = cls(
            accuracy=accuracy,
            latency_ms=latency_ms,
            nodes=nodes,
            outputs=outputs,
            pipeline=pipeline,
            slo_ms=slo_ms,
        )

        pipeline_infer_response.additional_properties = d
        return pipeline_infer_response

    @property
    def additional_keys(self) -> list[str]:
        return list(self.additional_properties.keys())

    def __getitem__(self, key: str) -> Any:
        return self.additional_properties[key]

    def __setitem__(self, key: str, value: Any) -> None:
        self.additional_properties[key] = value

    def __delitem__(self, key: str) -> None:
        del self.additional_properties[key]

    def __contains__(self, key: str) -> bool:
        return key in self.additional_properties

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.node_spec import NodeSpec
    from ..models.pipeline_input import PipelineInput
    from ..models.pipeline_overload import PipelineOverload
    from ..models.pipeline_slo import PipelineSlo
    from ..models.pipeline_spec_outputs import PipelineSpecOutputs


T = TypeVar("T", bound="PipelineSpec")


@_attrs_define
class PipelineSpec:
    """A pipeline document as registered (`POST /v1/pipelines`, JSON or YAML). Beyond what the
    fields say, the server checks (400, naming the node and the tensor): names unique among
    inputs and nodes; every source a pipeline input or `"node.output"` of another node; no
    cycle; outputs that every row gets; tensors that connect to the nodes' models.

        Attributes:
            inputs (list[PipelineInput]): Tensors a request brings, by name (referenced by nodes as bare names).
            name (str): The pipeline's name, unique in the tenant among pipelines, applications and models:
                1-64 of `[A-Za-z0-9._-]`, starting with a letter or digit.
            nodes (list[NodeSpec]): In any order; they run in dependency order.
            outputs (PipelineSpecOutputs): Tensors the answer carries, at least one: output name -> source (`"node.output"`;
                a
                combine node's only output is `"node.output"` too).
            description (None | str | Unset):
            overload (PipelineOverload | Unset): A pipeline's behaviour under overload.
            slo (PipelineSlo | Unset): The end-to-end requirements.
    """

    inputs: list[PipelineInput]
    name: str
    nodes: list[NodeSpec]
    outputs: PipelineSpecOutputs
    description: None | str | Unset = UNSET
    overload: PipelineOverload | Unset = UNSET
    slo: PipelineSlo | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        inputs = []
        for inputs_item_data in self.inputs:
            inputs_item = inputs_item_data.to_dict()
            inputs.append(inputs_item)

        name = self.name

        nodes = []
        for nodes_item_data in self.nodes:
            nodes_item = nodes_item_data.to_dict()
            nodes.append(nodes_item)

        outputs = self.outputs.to_dict()

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        overload: dict[str, Any] | Unset = UNSET
        if not isinstance(self.overload, Unset):
            overload = self.overload.to_dict()

        slo: dict[str, Any] | Unset = UNSET
        if not isinstance(self.slo, Unset):
            slo = self.slo.to_dict()

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "inputs": inputs,
                "name": name,
                "nodes": nodes,
                "outputs": outputs,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if overload is not UNSET:
            field_dict["overload"] = overload
        if slo is not UNSET:
            field_dict["slo"] = slo

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.node_spec import NodeSpec  # noqa: PLC0415
        from ..models.pipeline_input import PipelineInput  # noqa: PLC0415
        from ..models.pipeline_overload import PipelineOverload  # noqa: PLC0415
        from ..models.pipeline_slo import PipelineSlo  # noqa: PLC0415
        from ..models.pipeline_spec_outputs import PipelineSpecOutputs  # noqa: PLC0415

        d = dict(src_dict)
        inputs = []
        _inputs = d.pop("inputs")
        for inputs_item_data in _inputs:
            inputs_item = PipelineInput.from_dict(inputs_item_data)

            inputs.append(inputs_item)

        name = d.pop("name")

        nodes = []
        _nodes = d.pop("nodes")
        for nodes_item_data in _nodes:
            nodes_item = NodeSpec.from_dict(nodes_item_data)

            nodes.append(nodes_item)

        outputs = PipelineSpecOutputs.from_dict(d.pop("outputs"))

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        _overload = d.pop("overload", UNSET)
        overload: PipelineOverload | Unset
        if isinstance(_overload, Unset):
            overload = UNSET
        else:
            overload = PipelineOverload.from_dict(_overload)

        _slo = d.pop("slo", UNSET)
        slo: PipelineSlo | Unset
        if isinstance(_slo, Unset):
            slo = UNSET
        else:
            slo = PipelineSlo.from_dict(_slo)

        pipeline_spec = cls(
            inputs=inputs,
            name=name,
            nodes=nodes,
            outputs=outputs,
            description=description,
            overload=overload,
            slo=slo,
        )

        return pipeline_spec

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..models.pipeline_input_datatype import PipelineInputDatatype
from ..types import UNSET, Unset

T = TypeVar("T", bound="PipelineInput")


@_attrs_define
class PipelineInput:
    """A tensor of the request.

    Attributes:
        datatype (PipelineInputDatatype): Open Inference Protocol datatype, e.g. `FP32` (case-insensitive).
        name (str): Non-empty, without '.' (sources `"node.output"` hold one).
        shape (list[int] | Unset): Dimensions after the batch dimension; -1 for a dynamic one.
    """

    datatype: PipelineInputDatatype
    name: str
    shape: list[int] | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        datatype = self.datatype.value

        name = self.name

        shape: list[int] | Unset = UNSET
        if not isinstance(self.shape, Unset):
            shape = self.shape

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "datatype": datatype,
                "name": name,
            }
        )
        if shape is not UNSET:
            field_dict["shape"] = shape

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        datatype = PipelineInputDatatype(d.pop("datatype"))

        name = d.pop("name")

        shape = cast(list[int], d.pop("shape", UNSET))

        pipeline_input = cls(
            datatype=datatype,
            name=name,
            shape=shape,
        )

        return pipeline_input

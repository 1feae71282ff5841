from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..models.datatype import Datatype

T = TypeVar("T", bound="TensorJson")


@_attrs_define
class TensorJson:
    """A tensor in JSON: `data` is flat (row-major) or nested to match `shape`.

    Attributes:
        data (list[Any]): The elements, flat (row-major) or nested by the shape.
        datatype (Datatype): The datatypes of tensors in JSON (documentation of `datatype`).
        name (str):
        shape (list[int]):
    """

    data: list[Any]
    datatype: Datatype
    name: str
    shape: list[int]
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        data = self.data

        datatype = self.datatype.value

        name = self.name

        shape = self.shape

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "data": data,
                "datatype": datatype,
                "name": name,
                "shape": shape,
            }
        )

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        data = cast(list[Any], d.pop("data"))

        datatype = Datatype(d.pop("datatype"))

        name = d.pop("name")

        shape = cast(list[int], d.pop("shape"))

        tensor_json = cls(
            data=data,
            datatype=datatype,
            name=name,
            shape=shape,
        )

        tensor_json.additional_properties = d
        return tensor_json

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

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="PrunedVariantView")


@_attrs_define
class PrunedVariantView:
    """A variant the registration did not keep: another variant of the model on the same
    hardware, intra-op threads and max batch is at least as accurate and at least as fast at
    every batch size (not more than 5% slower on mean and p50 at any). It is never served; a
    file none of whose variants is kept is deleted.

        Attributes:
            dominated_by (str): The kept variant that dominates it.
            file (str): Which file: `source`, `optimized`, `int8`, `fp16`.
            hardware (str): `cpu` or `gpu`.
            max_batch (int):
            name (str): `{model}.{fp32|opt|int8|fp16}.{cpu|gpu}.t{threads}.b{max_batch}`.
            reason (str): Why, e.g. `accuracy 0.379 <= 1.000 of opt, not faster at any batch`.
            threads (int):
            accuracy (float | None | Unset): Top-1 accuracy of its file on the validation set, in [0, 1].
    """

    dominated_by: str
    file: str
    hardware: str
    max_batch: int
    name: str
    reason: str
    threads: int
    accuracy: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        dominated_by = self.dominated_by

        file = self.file

        hardware = self.hardware

        max_batch = self.max_batch

        name = self.name

        reason = self.reason

        threads = self.threads

        accuracy: float | None | Unset
        if isinstance(self.accuracy, Unset):
            accuracy = UNSET
        else:
            accuracy = self.accuracy

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "dominated_by": dominated_by,
                "file": file,
                "hardware": hardware,
                "max_batch": max_batch,
                "name": name,
                "reason": reason,
                "threads": threads,
            }
        )
        if accuracy is not UNSET:
            field_dict["accuracy"] = accuracy

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        dominated_by = d.pop("dominated_by")

        file = d.pop("file")

        hardware = d.pop("hardware")

        max_batch = d.pop("max_batch")

        name = d.pop("name")

        reason = d.pop("reason")

        threads = d.pop("threads")

        def _parse_accuracy(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        accuracy = _parse_accuracy(d.pop("accuracy", UNSET))

        pruned_variant_view = cls(
            dominated_by=dominated_by,
            file=file,
            hardware=hardware,
            max_batch=max_batch,
            name=name,
            reason=reason,
            threads=threads,
            accuracy=accuracy,
        )

        pruned_variant_view.additional_properties = d
        return pruned_variant_view

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

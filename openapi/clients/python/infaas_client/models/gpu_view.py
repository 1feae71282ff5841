from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="GpuView")


@_attrs_define
class GpuView:
    """
    Attributes:
        simulated (bool): `true`: not a real GPU (see docs/operations.md, "Simulated GPU workers").
        profile (None | str | Unset): The latency profile a simulated GPU follows (`PATH` or `PATH#MODEL#ACCEL`).
        profile_p50_ms_batch_1 (float | None | Unset): The profile's median latency at batch 1, in milliseconds.
    """

    simulated: bool
    profile: None | str | Unset = UNSET
    profile_p50_ms_batch_1: float | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        simulated = self.simulated

        profile: None | str | Unset
        if isinstance(self.profile, Unset):
            profile = UNSET
        else:
            profile = self.profile

        profile_p50_ms_batch_1: float | None | Unset
        if isinstance(self.profile_p50_ms_batch_1, Unset):
            profile_p50_ms_batch_1 = UNSET
        else:
            profile_p50_ms_batch_1 = self.profile_p50_ms_batch_1

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "simulated": simulated,
            }
        )
        if profile is not UNSET:
            field_dict["profile"] = profile
        if profile_p50_ms_batch_1 is not UNSET:
            field_dict["profile_p50_ms_batch_1"] = profile_p50_ms_batch_1

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        simulated = d.pop("simulated")

        def _parse_profile(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        profile = _parse_profile(d.pop("profile", UNSET))

        def _parse_profile_p50_ms_batch_1(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        profile_p50_ms_batch_1 = _parse_profile_p50_ms_batch_1(d.pop("profile_p50_ms_batch_1", UNSET))

        gpu_view = cls(
            simulated=simulated,
            profile=profile,
            profile_p50_ms_batch_1=profile_p50_ms_batch_1,
        )

        gpu_view.additional_properties = d
        return gpu_view

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

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define

from ..types import UNSET, Unset

T = TypeVar("T", bound="RecordedTrace")


@_attrs_define
class RecordedTrace:
    """The tenant's recorded traffic over the last `minutes`.

    Attributes:
        minutes (int): How far back, in minutes (the platform keeps `traffic_horizon_minutes`, default 60).
        app (None | str | Unset): One application (default: every application of the tenant).
    """

    minutes: int
    app: None | str | Unset = UNSET

    def to_dict(self) -> dict[str, Any]:
        minutes = self.minutes

        app: None | str | Unset
        if isinstance(self.app, Unset):
            app = UNSET
        else:
            app = self.app

        field_dict: dict[str, Any] = {}

        field_dict.update(
            {
                "minutes": minutes,
            }
        )
        if app is not UNSET:
            field_dict["app"] = app

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        minutes = d.pop("minutes")

        def _parse_app(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        app = _parse_app(d.pop("app", UNSET))

        recorded_trace = cls(
            minutes=minutes,
            app=app,
        )

        return recorded_trace

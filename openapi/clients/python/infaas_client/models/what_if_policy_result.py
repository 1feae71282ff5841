from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.what_if_app_summary import WhatIfAppSummary
    from ..models.what_if_point import WhatIfPoint
    from ..models.what_if_policy_result_actions_by_kind import WhatIfPolicyResultActionsByKind
    from ..models.what_if_summary import WhatIfSummary


T = TypeVar("T", bound="WhatIfPolicyResult")


@_attrs_define
class WhatIfPolicyResult:
    """What one policy did with the trace (SIMULATED).

    Attributes:
        apps (list[WhatIfAppSummary]):
        policy (str):
        series (list[WhatIfPoint]): Per simulated second.
        summary (WhatIfSummary): A run's totals under one policy (SIMULATED).
        actions_by_kind (WhatIfPolicyResultActionsByKind | Unset): Scaling actions over the run by kind (`replicate`,
            `upgrade`, `migrate`, ...).
    """

    apps: list[WhatIfAppSummary]
    policy: str
    series: list[WhatIfPoint]
    summary: WhatIfSummary
    actions_by_kind: WhatIfPolicyResultActionsByKind | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        apps = []
        for apps_item_data in self.apps:
            apps_item = apps_item_data.to_dict()
            apps.append(apps_item)

        policy = self.policy

        series = []
        for series_item_data in self.series:
            series_item = series_item_data.to_dict()
            series.append(series_item)

        summary = self.summary.to_dict()

        actions_by_kind: dict[str, Any] | Unset = UNSET
        if not isinstance(self.actions_by_kind, Unset):
            actions_by_kind = self.actions_by_kind.to_dict()

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "apps": apps,
                "policy": policy,
                "series": series,
                "summary": summary,
            }
        )
        if actions_by_kind is not UNSET:
            field_dict["actions_by_kind"] = actions_by_kind

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.what_if_app_summary import WhatIfAppSummary  # noqa: PLC0415
        from ..models.what_if_point import WhatIfPoint  # noqa: PLC0415
        from ..models.what_if_policy_result_actions_by_kind import WhatIfPolicyResultActionsByKind  # noqa: PLC0415
        from ..models.what_if_summary import WhatIfSummary  # noqa: PLC0415

        d = dict(src_dict)
        apps = []
        _apps = d.pop("apps")
        for apps_item_data in _apps:
            apps_item = WhatIfAppSummary.from_dict(apps_item_data)

            apps.append(apps_item)

        policy = d.pop("policy")

        series = []
        _series = d.pop("series")
        for series_item_data in _series:
            series_item = WhatIfPoint.from_dict(series_item_data)

            series.append(series_item)

        summary = WhatIfSummary.from_dict(d.pop("summary"))

        _actions_by_kind = d.pop("actions_by_kind", UNSET)
        actions_by_kind: WhatIfPolicyResultActionsByKind | Unset
        if isinstance(_actions_by_kind, Unset):
            actions_by_kind = UNSET
        else:
            actions_by_kind = WhatIfPolicyResultActionsByKind.from_dict(_actions_by_kind)

        what_if_policy_result = cls(
            apps=apps,
            policy=policy,
            series=series,
            summary=summary,
            actions_by_kind=actions_by_kind,
        )

        what_if_policy_result.additional_properties = d
        return what_if_policy_result

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

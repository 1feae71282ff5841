from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

if TYPE_CHECKING:
    from ..models.what_if_cluster import WhatIfCluster
    from ..models.what_if_policy_result import WhatIfPolicyResult
    from ..models.what_if_progress import WhatIfProgress
    from ..models.what_if_trace import WhatIfTrace


T = TypeVar("T", bound="WhatIfRun")


@_attrs_define
class WhatIfRun:
    """A what-if run.

    Attributes:
        cluster (WhatIfCluster): The simulated cluster.
        created_at_ms (int):
        id (str):
        policies (list[str]):
        progress (list[WhatIfProgress]): Per policy, in the order simulated.
        simulated (bool): Always true: the results are simulated over measured profiles, not measured.
        status (str): `queued`, `running`, `succeeded` or `failed` (with `error`).
        trace (WhatIfTrace): The trace a run replays.
        error (None | str | Unset):
        finished_at_ms (int | None | Unset):
        results (list[WhatIfPolicyResult] | None | Unset): Per policy, once the run has succeeded (`GET /v1/whatif/{id}`
            only).
        started_at_ms (int | None | Unset):
    """

    cluster: WhatIfCluster
    created_at_ms: int
    id: str
    policies: list[str]
    progress: list[WhatIfProgress]
    simulated: bool
    status: str
    trace: WhatIfTrace
    error: None | str | Unset = UNSET
    finished_at_ms: int | None | Unset = UNSET
    results: list[WhatIfPolicyResult] | None | Unset = UNSET
    started_at_ms: int | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        cluster = self.cluster.to_dict()

        created_at_ms = self.created_at_ms

        id = self.id

        policies = self.policies

        progress = []
        for progress_item_data in self.progress:
            progress_item = progress_item_data.to_dict()
            progress.append(progress_item)

        simulated = self.simulated

        status = self.status

        trace = self.trace.to_dict()

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        finished_at_ms: int | None | Unset
        if isinstance(self.finished_at_ms, Unset):
            finished_at_ms = UNSET
        else:
            finished_at_ms = self.finished_at_ms

        results: list[dict[str, Any]] | None | Unset
        if isinstance(self.results, Unset):
            results = UNSET
        elif isinstance(self.results, list):
            results = []
            for results_type_0_item_data in self.results:
                results_type_0_item = results_type_0_item_data.to_dict()
                results.append(results_type_0_item)

        else:
            results = self.results

        started_at_ms: int | None | Unset
        if isinstance(self.started_at_ms, Unset):
            started_at_ms = UNSET
        else:
            started_at_ms = self.started_at_ms

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "cluster": cluster,
                "created_at_ms": created_at_ms,
                "id": id,
                "policies": policies,
                "progress": progress,
                "simulated": simulated,
                "status": status,
                "trace": trace,
            }
        )
        if error is not UNSET:
            field_dict["error"] = error
        if finished_at_ms is not UNSET:
            field_dict["finished_at_ms"] = finished_at_ms
        if results is not UNSET:
            field_dict["results"] = results
        if started_at_ms is not UNSET:
            field_dict["started_at_ms"] = started_at_ms

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        from ..models.what_if_cluster import WhatIfCluster  # noqa: PLC0415
        from ..models.what_if_policy_result import WhatIfPolicyResult  # noqa: PLC0415
        from ..models.what_if_progress import WhatIfProgress  # noqa: PLC0415
        from ..models.what_if_trace import WhatIfTrace  # noqa: PLC0415

        d = dict(src_dict)
        cluster = WhatIfCluster.from_dict(d.pop("cluster"))

        created_at_ms = d.pop("created_at_ms")

        id = d.pop("id")

        policies = cast(list[str], d.pop("policies"))

        progress = []
        _progress = d.pop("progress")
        for progress_item_data in _progress:
            progress_item = WhatIfProgress.from_dict(progress_item_data)

            progress.append(progress_item)

        simulated = d.pop("simulated")

        status = d.pop("status")

        trace = WhatIfTrace.from_dict(d.pop("trace"))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_finished_at_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        finished_at_ms = _parse_finished_at_ms(d.pop("finished_at_ms", UNSET))

        def _parse_results(data: object) -> list[WhatIfPolicyResult] | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, list):
                    raise TypeError()
                results_type_0 = []
                _results_type_0 = data
                for results_type_0_item_data in _results_type_0:
                    results_type_0_item = WhatIfPolicyResult.from_dict(results_type_0_item_data)

                    results_type_0.append(results_type_0_item)

                return results_type_0
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(list[WhatIfPolicyResult] | None | Unset, data)

        results = _parse_results(d.pop("results", UNSET))

        def _parse_started_at_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        started_at_ms = _parse_started_at_ms(d.pop("started_at_ms", UNSET))

        what_if_run = cls(
            cluster=cluster,
            created_at_ms=created_at_ms,
            id=id,
            policies=policies,
            progress=progress,
            simulated=simulated,
            status=status,
            trace=trace,
            error=error,
            finished_at_ms=finished_at_ms,
            results=results,
            started_at_ms=started_at_ms,
        )

        what_if_run.additional_properties = d
        return what_if_run

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

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="JobView")


@_attrs_define
class JobView:
    """A job as the API shows it.

    Attributes:
        created_at_ms (int):
        id (str):
        input_path (str): The input prefix in the tenant's file area.
        items_done (int):
        items_total (int):
        output_path (str): Where the outputs go in the tenant's file area (`part-NNNNNN.jsonl`, one per chunk).
        progress (float): `items_done / items_total`.
        state (str): `queued`, `running`, `paused`, `succeeded`, `failed` or `cancelled`.
        app (None | str | Unset):
        error (None | str | Unset):
        eta_s (float | None | Unset): Seconds left at that rate.
        finished_at_ms (int | None | Unset):
        items_per_s (float | None | Unset): Items per second since the job started.
        min_accuracy (float | None | Unset):
        model (None | str | Unset):
        paused_reason (None | str | Unset): Why the job is paused (online load).
        pipeline (None | str | Unset): The pipeline the job runs its items through.
        started_at_ms (int | None | Unset):
        variant (None | str | Unset): The variant the job runs on (chosen for throughput per cost).
        webhook_url (None | str | Unset):
    """

    created_at_ms: int
    id: str
    input_path: str
    items_done: int
    items_total: int
    output_path: str
    progress: float
    state: str
    app: None | str | Unset = UNSET
    error: None | str | Unset = UNSET
    eta_s: float | None | Unset = UNSET
    finished_at_ms: int | None | Unset = UNSET
    items_per_s: float | None | Unset = UNSET
    min_accuracy: float | None | Unset = UNSET
    model: None | str | Unset = UNSET
    paused_reason: None | str | Unset = UNSET
    pipeline: None | str | Unset = UNSET
    started_at_ms: int | None | Unset = UNSET
    variant: None | str | Unset = UNSET
    webhook_url: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        created_at_ms = self.created_at_ms

        id = self.id

        input_path = self.input_path

        items_done = self.items_done

        items_total = self.items_total

        output_path = self.output_path

        progress = self.progress

        state = self.state

        app: None | str | Unset
        if isinstance(self.app, Unset):
            app = UNSET
        else:
            app = self.app

        error: None | str | Unset
        if isinstance(self.error, Unset):
            error = UNSET
        else:
            error = self.error

        eta_s: float | None | Unset
        if isinstance(self.eta_s, Unset):
            eta_s = UNSET
        else:
            eta_s = self.eta_s

        finished_at_ms: int | None | Unset
        if isinstance(self.finished_at_ms, Unset):
            finished_at_ms = UNSET
        else:
            finished_at_ms = self.finished_at_ms

        items_per_s: float | None | Unset
        if isinstance(self.items_per_s, Unset):
            items_per_s = UNSET
        else:
            items_per_s = self.items_per_s

        min_accuracy: float | None | Unset
        if isinstance(self.min_accuracy, Unset):
            min_accuracy = UNSET
        else:
            min_accuracy = self.min_accuracy

        model: None | str | Unset
        if isinstance(self.model, Unset):
            model = UNSET
        else:
            model = self.model

        paused_reason: None | str | Unset
        if isinstance(self.paused_reason, Unset):
            paused_reason = UNSET
        else:
            paused_reason = self.paused_reason

        pipeline: None | str | Unset
        if isinstance(self.pipeline, Unset):
            pipeline = UNSET
        else:
            pipeline = self.pipeline

        started_at_ms: int | None | Unset
        if isinstance(self.started_at_ms, Unset):
            started_at_ms = UNSET
        else:
            started_at_ms = self.started_at_ms

        variant: None | str | Unset
        if isinstance(self.variant, Unset):
            variant = UNSET
        else:
            variant = self.variant

        webhook_url: None | str | Unset
        if isinstance(self.webhook_url, Unset):
            webhook_url = UNSET
        else:
            webhook_url = self.webhook_url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "created_at_ms": created_at_ms,
                "id": id,
                "input_path": input_path,
                "items_done": items_done,
                "items_total": items_total,
                "output_path": output_path,
                "progress": progress,
                "state": state,
            }
        )
        if app is not UNSET:
            field_dict["app"] = app
        if error is not UNSET:
            field_dict["error"] = error
        if eta_s is not UNSET:
            field_dict["eta_s"] = eta_s
        if finished_at_ms is not UNSET:
            field_dict["finished_at_ms"] = finished_at_ms
        if items_per_s is not UNSET:
            field_dict["items_per_s"] = items_per_s
        if min_accuracy is not UNSET:
            field_dict["min_accuracy"] = min_accuracy
        if model is not UNSET:
            field_dict["model"] = model
        if paused_reason is not UNSET:
            field_dict["paused_reason"] = paused_reason
        if pipeline is not UNSET:
            field_dict["pipeline"] = pipeline
        if started_at_ms is not UNSET:
            field_dict["started_at_ms"] = started_at_ms
        if variant is not UNSET:
            field_dict["variant"] = variant
        if webhook_url is not UNSET:
            field_dict["webhook_url"] = webhook_url

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        created_at_ms = d.pop("created_at_ms")

        id = d.pop("id")

        input_path = d.pop("input_path")

        items_done = d.pop("items_done")

        items_total = d.pop("items_total")

        output_path = d.pop("output_path")

        progress = d.pop("progress")

        state = d.pop("state")

        def _parse_app(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        app = _parse_app(d.pop("app", UNSET))

        def _parse_error(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        error = _parse_error(d.pop("error", UNSET))

        def _parse_eta_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        eta_s = _parse_eta_s(d.pop("eta_s", UNSET))

        def _parse_finished_at_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        finished_at_ms = _parse_finished_at_ms(d.pop("finished_at_ms", UNSET))

        def _parse_items_per_s(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        items_per_s = _parse_items_per_s(d.pop("items_per_s", UNSET))

        def _parse_min_accuracy(data: object) -> float | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(float | None | Unset, data)

        min_accuracy = _parse_min_accuracy(d.pop("min_accuracy", UNSET))

        def _parse_model(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        model = _parse_model(d.pop("model", UNSET))

        def _parse_paused_reason(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        paused_reason = _parse_paused_reason(d.pop("paused_reason", UNSET))

        def _parse_pipeline(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        pipeline = _parse_pipeline(d.pop("pipeline", UNSET))

        def _parse_started_at_ms(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        started_at_ms = _parse_started_at_ms(d.pop("started_at_ms", UNSET))

        def _parse_variant(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        variant = _parse_variant(d.pop("variant", UNSET))

        def _parse_webhook_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        webhook_url = _parse_webhook_url(d.pop("webhook_url", UNSET))

        job_view = cls(
            created_at_ms=created_at_ms,
            id=id,
            input_path=input_path,
            items_done=items_done,
            items_total=items_total,
            output_path=output_path,
            progress=progress,
            state=state,
            app=app,
            error=error,
            eta_s=eta_s,
            finished_at_ms=finished_at_ms,
            items_per_s=items_per_s,
            min_accuracy=min_accuracy,
            model=model,
            paused_reason=paused_reason,
            pipeline=pipeline,
            started_at_ms=started_at_ms,
            variant=variant,
            webhook_url=webhook_url,
        )

        job_view.additional_properties = d
        return job_view

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

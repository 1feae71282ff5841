from __future__ import annotations

from collections.abc import Mapping
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from ..types import UNSET, Unset

T = TypeVar("T", bound="JobRequest")


@_attrs_define
class JobRequest:
    """
    Attributes:
        input_path (str): A prefix (folder) of `.npz` / `.jsonl` objects, or one object, in the file area.
        app (None | str | Unset): Model-less: the application whose variants may run the job (give `app` or `model`).
        min_accuracy (float | None | Unset): Smallest acceptable accuracy, a fraction in [0, 1] (application jobs only).
        model (None | str | Unset): Or one registered model.
        output_path (None | str | Unset): Where outputs go in the file area (default `job-outputs/<uuid>`).
        pipeline (None | str | Unset): Or a pipeline: every item goes through it (give one of `app`, `model`,
            `pipeline`).
        webhook_url (None | str | Unset): Called with the job (POST, JSON) when it ends.
    """

    input_path: str
    app: None | str | Unset = UNSET
    min_accuracy: float | None | Unset = UNSET
    model: None | str | Unset = UNSET
    output_path: None | str | Unset = UNSET
    pipeline: None | str | Unset = UNSET
    webhook_url: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        input_path = self.input_path

        app: None | str | Unset
        if isinstance(self.app, Unset):
            app = UNSET
        else:
            app = self.app

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

        output_path: None | str | Unset
        if isinstance(self.output_path, Unset):
            output_path = UNSET
        else:
            output_path = self.output_path

        pipeline: None | str | Unset
        if isinstance(self.pipeline, Unset):
            pipeline = UNSET
        else:
            pipeline = self.pipeline

        webhook_url: None | str | Unset
        if isinstance(self.webhook_url, Unset):
            webhook_url = UNSET
        else:
            webhook_url = self.webhook_url

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "input_path": input_path,
            }
        )
        if app is not UNSET:
            field_dict["app"] = app
        if min_accuracy is not UNSET:
            field_dict["min_accuracy"] = min_accuracy
        if model is not UNSET:
            field_dict["model"] = model
        if output_path is not UNSET:
            field_dict["output_path"] = output_path
        if pipeline is not UNSET:
            field_dict["pipeline"] = pipeline
        if webhook_url is not UNSET:
            field_dict["webhook_url"] = webhook_url

        return field_dict

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        input_path = d.pop("input_path")

        def _parse_app(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        app = _parse_app(d.pop("app", UNSET))

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

        def _parse_output_path(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        output_path = _parse_output_path(d.pop("output_path", UNSET))

        def _parse_pipeline(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        pipeline = _parse_pipeline(d.pop("pipeline", UNSET))

        def _parse_webhook_url(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        webhook_url = _parse_webhook_url(d.pop("webhook_url", UNSET))

        job_request = cls(
            input_path=input_path,
            app=app,
            min_accuracy=min_accuracy,
            model=model,
            output_path=output_path,
            pipeline=pipeline,
            webhook_url=webhook_url,
        )

        job_request.additional_properties = d
        return job_request

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

from __future__ import annotations

from collections.abc import Mapping
from io import BytesIO
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from .. import types
from ..types import UNSET, File, Unset

T = TypeVar("T", bound="JobForm")


@_attrs_define
class JobForm:
    """Multipart form of `POST /v1/jobs` (for OpenAPI): input files are uploaded with the job.

    Attributes:
        input_ (list[File]): One or more `.npz` / `.jsonl` files (repeat the field).
        app (None | str | Unset):
        min_accuracy (float | None | Unset):
        model (None | str | Unset):
        output_path (None | str | Unset):
        pipeline (None | str | Unset):
        webhook_url (None | str | Unset):
    """

    input_: list[File]
    app: None | str | Unset = UNSET
    min_accuracy: float | None | Unset = UNSET
    model: None | str | Unset = UNSET
    output_path: None | str | Unset = UNSET
    pipeline: None | str | Unset = UNSET
    webhook_url: None | str | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        input_ = []
        for input_item_data in self.input_:
            input_item = input_item_data.to_tuple()

            input_.append(input_item)

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
                "input": input_,
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

    def to_multipart(self) -> types.RequestFiles:
        files: types.RequestFiles = []

        for input_item_element in self.input_:
            files.append(("input", input_item_element.to_tuple()))

        if not isinstance(self.app, Unset):
            if isinstance(self.app, str):
                files.append(("app", (None, str(self.app).encode(), "text/plain")))
            else:
                files.append(("app", (None, str(self.app).encode(), "text/plain")))

        if not isinstance(self.min_accuracy, Unset):
            if isinstance(self.min_accuracy, float):
                files.append(("min_accuracy", (None, str(self.min_accuracy).encode(), "text/plain")))
            else:
                files.append(("min_accuracy", (None, str(self.min_accuracy).encode(), "text/plain")))

        if not isinstance(self.model, Unset):
            if isinstance(self.model, str):
                files.append(("model", (None, str(self.model).encode(), "text/plain")))
            else:
                files.append(("model", (None, str(self.model).encode(), "text/plain")))

        if not isinstance(self.output_path, Unset):
            if isinstance(self.output_path, str):
                files.append(("output_path", (None, str(self.output_path).encode(), "text/plain")))
            else:
                files.append(("output_path", (None, str(self.output_path).encode(), "text/plain")))

        if not isinstance(self.pipeline, Unset):
            if isinstance(self.pipeline, str):
                files.append(("pipeline", (None, str(self.pipeline).encode(), "text/plain")))
            else:
                files.append(("pipeline", (None, str(self.pipeline).encode(), "text/plain")))

        if not isinstance(self.webhook_url, Unset):
            if isinstance(self.webhook_url, str):
                files.append(("webhook_url", (None, str(self.webhook_url).encode(), "text/plain")))
            else:
                files.append(("webhook_url", (None, str(self.webhook_url).encode(), "text/plain")))

        for prop_name, prop in self.additional_properties.items():
            files.append((prop_name, (None, str(prop).encode(), "text/plain")))

        return files

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        input_ = []
        _input_ = d.pop("input")
        for input_item_data in _input_:
            input_item = File(payload=BytesIO(input_item_data))

            input_.append(input_item)

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

        job_form = cls(
            input_=input_,
            app=app,
            min_accuracy=min_accuracy,
            model=model,
            output_path=output_path,
            pipeline=pipeline,
            webhook_url=webhook_url,
        )

        job_form.additional_properties = d
        return job_form

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

from __future__ import annotations

from collections.abc import Mapping
from io import BytesIO
from typing import Any, TypeVar, cast

from attrs import define as _attrs_define
from attrs import field as _attrs_field

from .. import types
from ..models.model_task import ModelTask
from ..types import UNSET, File, Unset

T = TypeVar("T", bound="RegisterForm")


@_attrs_define
class RegisterForm:
    """Multipart form of a registration (documentation only).

    Attributes:
        app (str): Application (created when new); the same rule as `name`.
        model (File): The ONNX file.
        name (str): Model name, unique in the tenant: 1-64 of `[A-Za-z0-9._-]`, starting with a letter or digit.
        validation (File): NPZ with `x` (or `x.<input>` per input) and integer labels `y`.
        description (None | str | Unset):
        label_names (None | str | Unset): Class names by label, as a JSON array of strings or comma-separated, none
            empty.
        max_batch (int | None | Unset): Largest batch the model may be given.
        output (None | str | Unset): Output holding class scores or labels (automatic when absent).
        task (ModelTask | None | Unset):
    """

    app: str
    model: File
    name: str
    validation: File
    description: None | str | Unset = UNSET
    label_names: None | str | Unset = UNSET
    max_batch: int | None | Unset = UNSET
    output: None | str | Unset = UNSET
    task: ModelTask | None | Unset = UNSET
    additional_properties: dict[str, Any] = _attrs_field(init=False, factory=dict)

    def to_dict(self) -> dict[str, Any]:
        app = self.app

        model = self.model.to_tuple()

        name = self.name

        validation = self.validation.to_tuple()

        description: None | str | Unset
        if isinstance(self.description, Unset):
            description = UNSET
        else:
            description = self.description

        label_names: None | str | Unset
        if isinstance(self.label_names, Unset):
            label_names = UNSET
        else:
            label_names = self.label_names

        max_batch: int | None | Unset
        if isinstance(self.max_batch, Unset):
            max_batch = UNSET
        else:
            max_batch = self.max_batch

        output: None | str | Unset
        if isinstance(self.output, Unset):
            output = UNSET
        else:
            output = self.output

        task: None | str | Unset
        if isinstance(self.task, Unset):
            task = UNSET
        elif isinstance(self.task, ModelTask):
            task = self.task.value
        else:
            task = self.task

        field_dict: dict[str, Any] = {}
        field_dict.update(self.additional_properties)
        field_dict.update(
            {
                "app": app,
                "model": model,
                "name": name,
                "validation": validation,
            }
        )
        if description is not UNSET:
            field_dict["description"] = description
        if label_names is not UNSET:
            field_dict["label_names"] = label_names
        if max_batch is not UNSET:
            field_dict["max_batch"] = max_batch
        if output is not UNSET:
            field_dict["output"] = output
        if task is not UNSET:
            field_dict["task"] = task

        return field_dict

    def to_multipart(self) -> types.RequestFiles:
        files: types.RequestFiles = []

        files.append(("app", (None, str(self.app).encode(), "text/plain")))

        files.append(("model", self.model.to_tuple()))

        files.append(("name", (None, str(self.name).encode(), "text/plain")))

        files.append(("validation", self.validation.to_tuple()))

        if not isinstance(self.description, Unset):
            if isinstance(self.description, str):
                files.append(("description", (None, str(self.description).encode(), "text/plain")))
            else:
                files.append(("description", (None, str(self.description).encode(), "text/plain")))

        if not isinstance(self.label_names, Unset):
            if isinstance(self.label_names, str):
                files.append(("label_names", (None, str(self.label_names).encode(), "text/plain")))
            else:
                files.append(("label_names", (None, str(self.label_names).encode(), "text/plain")))

        if not isinstance(self.max_batch, Unset):
            if isinstance(self.max_batch, int):
                files.append(("max_batch", (None, str(self.max_batch).encode(), "text/plain")))
            else:
                files.append(("max_batch", (None, str(self.max_batch).encode(), "text/plain")))

        if not isinstance(self.output, Unset):
            if isinstance(self.output, str):
                files.append(("output", (None, str(self.output).encode(), "text/plain")))
            else:
                files.append(("output", (None, str(self.output).encode(), "text/plain")))

        if not isinstance(self.task, Unset):
            if self.task is None:
                files.append(("task", (None, str(self.task).encode(), "text/plain")))
            else:
                files.append(("task", (None, str(self.task.value).encode(), "text/plain")))

        for prop_name, prop in self.additional_properties.items():
            files.append((prop_name, (None, str(prop).encode(), "text/plain")))

        return files

    @classmethod
    def from_dict(cls: type[T], src_dict: Mapping[str, Any]) -> T:
        d = dict(src_dict)
        app = d.pop("app")

        model = File(payload=BytesIO(d.pop("model")))

        name = d.pop("name")

        validation = File(payload=BytesIO(d.pop("validation")))

        def _parse_description(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        description = _parse_description(d.pop("description", UNSET))

        def _parse_label_names(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        label_names = _parse_label_names(d.pop("label_names", UNSET))

        def _parse_max_batch(data: object) -> int | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(int | None | Unset, data)

        max_batch = _parse_max_batch(d.pop("max_batch", UNSET))

        def _parse_output(data: object) -> None | str | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            return cast(None | str | Unset, data)

        output = _parse_output(d.pop("output", UNSET))

        def _parse_task(data: object) -> ModelTask | None | Unset:
            if data is None:
                return data
            if isinstance(data, Unset):
                return data
            try:
                if not isinstance(data, str):
                    raise TypeError()
                task_type_1 = ModelTask(data)

                return task_type_1
            except (TypeError, ValueError, AttributeError, KeyError):
                pass
            return cast(ModelTask | None | Unset, data)

        task = _parse_task(d.pop("task", UNSET))

        register_form = cls(
            app=app,
            model=model,
            name=name,
            validation=validation,
            description=description,
            label_names=label_names,
            max_batch=max_batch,
            output=output,
            task=task,
        )

        register_form.additional_properties = d
        return register_form

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

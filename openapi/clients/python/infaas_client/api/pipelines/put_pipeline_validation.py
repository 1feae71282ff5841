from http import HTTPStatus
from typing import Any
from urllib.parse import quote

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.pipeline_validation import PipelineValidation
from ...types import UNSET, Response, Unset


def _get_kwargs(
    name: str,
    *,
    body: list[int],
    output: None | str | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    params: dict[str, Any] = {}

    json_output: None | str | Unset
    if isinstance(output, Unset):
        json_output = UNSET
    else:
        json_output = output
    params["output"] = json_output

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "put",
        "url": "/v1/pipelines/{name}/validation".format(
            name=quote(str(name), safe=""),
        ),
        "params": params,
    }

    _kwargs["content"] = body.payload
    headers["Content-Type"] = "application/octet-stream"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> ErrorBody | PipelineValidation | None:
    if response.status_code == 200:
        response_200 = PipelineValidation.from_dict(response.json())

        return response_200

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

    if response.status_code == 404:
        response_404 = ErrorBody.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = ErrorBody.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = ErrorBody.from_dict(response.json())

        return response_413

    if response.status_code == 415:
        response_415 = ErrorBody.from_dict(response.json())

        return response_415

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | PipelineValidation]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: list[int],
    output: None | str | Unset = UNSET,
) -> Response[ErrorBody | PipelineValidation]:
    """Uploads (or replaces) the pipeline's validation set: an NPZ file like a model's, with the
    pipeline's inputs (`x`, or `x.<input>` for several) and integer labels `y` graded against
    one output (its argmax per row). Plans then measure the end-to-end accuracy of the
    combinations of models they consider on it, instead of estimating it.

    Args:
        name (str):
        output (None | str | Unset):
        body (list[int]):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PipelineValidation]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
        output=output,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    name: str,
    *,
    client: AuthenticatedClient,
    body: list[int],
    output: None | str | Unset = UNSET,
) -> ErrorBody | PipelineValidation | None:
    """Uploads (or replaces) the pipeline's validation set: an NPZ file like a model's, with the
    pipeline's inputs (`x`, or `x.<input>` for several) and integer labels `y` graded against
    one output (its argmax per row). Plans then measure the end-to-end accuracy of the
    combinations of models they consider on it, instead of estimating it.

    Args:
        name (str):
        output (None | str | Unset):
        body (list[int]):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PipelineValidation
    """

    return sync_detailed(
        name=name,
        client=client,
        body=body,
        output=output,
    ).parsed


async def asyncio_detailed(
    name: str,
    *,
    client: AuthenticatedClient,
    body: list[int],
    output: None | str | Unset = UNSET,
) -> Response[ErrorBody | PipelineValidation]:
    """Uploads (or replaces) the pipeline's validation set: an NPZ file like a model's, with the
    pipeline's inputs (`x`, or `x.<input>` for several) and integer labels `y` graded against
    one output (its argmax per row). Plans then measure the end-to-end accuracy of the
    combinations of models they consider on it, instead of estimating it.

    Args:
        name (str):
        output (None | str | Unset):
        body (list[int]):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | PipelineValidation]
    """

    kwargs = _get_kwargs(
        name=name,
        body=body,
        output=output,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    name: str,
    *,
    client: AuthenticatedClient,
    body: list[int],
    output: None | str | Unset = UNSET,
) -> ErrorBody | PipelineValidation | None:
    """Uploads (or replaces) the pipeline's validation set: an NPZ file like a model's, with the
    pipeline's inputs (`x`, or `x.<input>` for several) and integer labels `y` graded against
    one output (its argmax per row). Plans then measure the end-to-end accuracy of the
    combinations of models they consider on it, instead of estimating it.

    Args:
        name (str):
        output (None | str | Unset):
        body (list[int]):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | PipelineValidation
    """

    return (
        await asyncio_detailed(
            name=name,
            client=client,
            body=body,
            output=output,
        )
    ).parsed

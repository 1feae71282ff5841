from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.job_form import JobForm
from ...models.job_request import JobRequest
from ...models.job_view import JobView
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    body: JobRequest | JobForm | Unset = UNSET,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/jobs",
    }

    if isinstance(body, JobRequest):
        _kwargs["json"] = body.to_dict()

        headers["Content-Type"] = "application/json"
    if isinstance(body, JobForm):
        _kwargs["files"] = body.to_multipart()

        headers["Content-Type"] = "multipart/form-data; boundary=+++"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | JobView | None:
    if response.status_code == 202:
        response_202 = JobView.from_dict(response.json())

        return response_202

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

    if response.status_code == 422:
        response_422 = ErrorBody.from_dict(response.json())

        return response_422

    if response.status_code == 429:
        response_429 = ErrorBody.from_dict(response.json())

        return response_429

    if response.status_code == 503:
        response_503 = ErrorBody.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[ErrorBody | JobView]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: JobRequest | JobForm | Unset = UNSET,
) -> Response[ErrorBody | JobView]:
    """Submits an offline job: JSON naming inputs in the file area, or multipart with the input
    files. Inputs are read and checked against the target's models before the job is queued.

    Args:
        body (JobRequest):
        body (JobForm): Multipart form of `POST /v1/jobs` (for OpenAPI): input files are uploaded
            with the job.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobView]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: JobRequest | JobForm | Unset = UNSET,
) -> ErrorBody | JobView | None:
    """Submits an offline job: JSON naming inputs in the file area, or multipart with the input
    files. Inputs are read and checked against the target's models before the job is queued.

    Args:
        body (JobRequest):
        body (JobForm): Multipart form of `POST /v1/jobs` (for OpenAPI): input files are uploaded
            with the job.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobView
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: JobRequest | JobForm | Unset = UNSET,
) -> Response[ErrorBody | JobView]:
    """Submits an offline job: JSON naming inputs in the file area, or multipart with the input
    files. Inputs are read and checked against the target's models before the job is queued.

    Args:
        body (JobRequest):
        body (JobForm): Multipart form of `POST /v1/jobs` (for OpenAPI): input files are uploaded
            with the job.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | JobView]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: JobRequest | JobForm | Unset = UNSET,
) -> ErrorBody | JobView | None:
    """Submits an offline job: JSON naming inputs in the file area, or multipart with the input
    files. Inputs are read and checked against the target's models before the job is queued.

    Args:
        body (JobRequest):
        body (JobForm): Multipart form of `POST /v1/jobs` (for OpenAPI): input files are uploaded
            with the job.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | JobView
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed

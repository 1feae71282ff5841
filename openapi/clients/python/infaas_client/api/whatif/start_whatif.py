from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.error_body import ErrorBody
from ...models.what_if_request import WhatIfRequest
from ...models.what_if_run import WhatIfRun
from ...types import Response


def _get_kwargs(
    *,
    body: WhatIfRequest,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/whatif",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> ErrorBody | WhatIfRun | None:
    if response.status_code == 202:
        response_202 = WhatIfRun.from_dict(response.json())

        return response_202

    if response.status_code == 400:
        response_400 = ErrorBody.from_dict(response.json())

        return response_400

    if response.status_code == 401:
        response_401 = ErrorBody.from_dict(response.json())

        return response_401

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

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[ErrorBody | WhatIfRun]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: WhatIfRequest,
) -> Response[ErrorBody | WhatIfRun]:
    """Starts a SIMULATED what-if run: the trace (recorded traffic, a CSV trace or a
    generator) replayed on the tenant's applications, with the profiles the platform
    measured for their variants, under each policy. Limits: `whatif.max_csv_bytes` (8 MiB)
    of CSV, `whatif.max_queries` (250,000) queries, `whatif.max_duration_s` (7,200 s) of
    trace, 1 to 4 distinct policies, `whatif.max_unfinished_per_tenant` (1) run queued or
    running per tenant.

    Args:
        body (WhatIfRequest): `POST /v1/whatif`: simulate a trace on the tenant's applications
            under some policies.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | WhatIfRun]
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
    body: WhatIfRequest,
) -> ErrorBody | WhatIfRun | None:
    """Starts a SIMULATED what-if run: the trace (recorded traffic, a CSV trace or a
    generator) replayed on the tenant's applications, with the profiles the platform
    measured for their variants, under each policy. Limits: `whatif.max_csv_bytes` (8 MiB)
    of CSV, `whatif.max_queries` (250,000) queries, `whatif.max_duration_s` (7,200 s) of
    trace, 1 to 4 distinct policies, `whatif.max_unfinished_per_tenant` (1) run queued or
    running per tenant.

    Args:
        body (WhatIfRequest): `POST /v1/whatif`: simulate a trace on the tenant's applications
            under some policies.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | WhatIfRun
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: WhatIfRequest,
) -> Response[ErrorBody | WhatIfRun]:
    """Starts a SIMULATED what-if run: the trace (recorded traffic, a CSV trace or a
    generator) replayed on the tenant's applications, with the profiles the platform
    measured for their variants, under each policy. Limits: `whatif.max_csv_bytes` (8 MiB)
    of CSV, `whatif.max_queries` (250,000) queries, `whatif.max_duration_s` (7,200 s) of
    trace, 1 to 4 distinct policies, `whatif.max_unfinished_per_tenant` (1) run queued or
    running per tenant.

    Args:
        body (WhatIfRequest): `POST /v1/whatif`: simulate a trace on the tenant's applications
            under some policies.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[ErrorBody | WhatIfRun]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: WhatIfRequest,
) -> ErrorBody | WhatIfRun | None:
    """Starts a SIMULATED what-if run: the trace (recorded traffic, a CSV trace or a
    generator) replayed on the tenant's applications, with the profiles the platform
    measured for their variants, under each policy. Limits: `whatif.max_csv_bytes` (8 MiB)
    of CSV, `whatif.max_queries` (250,000) queries, `whatif.max_duration_s` (7,200 s) of
    trace, 1 to 4 distinct policies, `whatif.max_unfinished_per_tenant` (1) run queued or
    running per tenant.

    Args:
        body (WhatIfRequest): `POST /v1/whatif`: simulate a trace on the tenant's applications
            under some policies.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        ErrorBody | WhatIfRun
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed

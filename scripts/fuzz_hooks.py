"""Schemathesis hooks of scripts/fuzz-api.sh (loaded through SCHEMATHESIS_HOOKS)."""

import os

import schemathesis

# Set by fuzz-api.sh for the passes that send a bad token.
BAD_TOKEN = os.environ.get("INFAAS_FUZZ_BAD_TOKEN") == "1"


def _needs_token(case) -> bool:
    definition = case.operation.definition.raw
    return bool(definition.get("security"))


@schemathesis.check
def only_401(ctx, response, case):
    """With a bad bearer token (expired or forged), an operation that requires one answers
    401 and nothing else: no other status may leak what the request would have done."""
    if BAD_TOKEN and _needs_token(case) and response.status_code != 401:
        raise AssertionError(
            f"{case.operation.label} answered {response.status_code} to a bad token, not 401"
        )

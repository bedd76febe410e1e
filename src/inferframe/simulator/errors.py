"""OpenAI-shaped API errors: ``{"error": {"message", "type", "param", "code"}}`` + status.

Raise :class:`SimError` anywhere in a handler; the pipeline turns it into the
JSON body, status and headers.  Constructors for the common cases mirror the
messages of the real API.

Example:
    >>> import json
    >>> err = invalid_request("Missing required parameter: 'messages'.",
    ...                       param="messages", code="missing_required_parameter")
    >>> json.loads(err.body())["error"]["code"], err.status
    ('missing_required_parameter', 400)
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Optional

from .jsonio import dumps

__all__ = [
    "SimError",
    "error_body",
    "invalid_request",
    "invalid_api_key",
    "model_not_found",
    "server_error",
    "overloaded",
    "invalid_json",
    "error_for_status",
]


def error_body(message: str, type: str, param: Optional[str] = None, code: Optional[str] = None) -> bytes:
    """Encode an OpenAI error body: ``{"error": {"message", "type", "param", "code"}}``."""
    return dumps({"error": {"message": message, "type": type, "param": param, "code": code}})


class SimError(Exception):
    """An API error to send back.

    Params: status (HTTP), message, type, param, code (the four OpenAI fields),
    headers (extra response headers, e.g. Retry-After).
    """

    def __init__(
        self,
        status: int,
        message: str,
        type: str = "invalid_request_error",
        param: Optional[str] = None,
        code: Optional[str] = None,
        headers: Optional[dict[str, str]] = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.type = type
        self.param = param
        self.code = code
        self.headers = headers

    def body(self) -> bytes:
        """The JSON body of this error."""
        return error_body(self.message, self.type, self.param, self.code)


def invalid_request(message: str, param: Optional[str] = None, code: Optional[str] = None) -> SimError:
    """400 invalid_request_error."""
    return SimError(400, message, "invalid_request_error", param, code)


def invalid_json() -> SimError:
    """400 for a body that is not JSON (the real API's wording)."""
    return invalid_request(
        "We could not parse the JSON body of your request. (HINT: This likely means you aren't using your "
        "HTTP library correctly. The OpenAI API expects a JSON payload, but what was sent was not valid JSON. "
        "If you have trouble figuring out how to fix this, please contact us through our help center at "
        "help.openai.com.)"
    )


def invalid_api_key(provided: Optional[str]) -> SimError:
    """401 invalid_api_key for a missing or wrong bearer key."""
    if not provided:
        msg = (
            "You didn't provide an API key. You need to provide your API key in an Authorization header "
            "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY), or as the password field (with blank "
            "username) if you're accessing the API from your browser and are prompted for a username and "
            "password. You can obtain an API key from https://platform.openai.com/account/api-keys."
        )
    else:
        shown = provided[:3] + "*" * max(0, min(len(provided) - 7, 20)) + provided[-4:] if len(provided) > 8 else "****"
        msg = (
            f"Incorrect API key provided: {shown}. You can find your API key at "
            "https://platform.openai.com/account/api-keys."
        )
    return SimError(401, msg, "invalid_request_error", None, "invalid_api_key")


def model_not_found(model: str) -> SimError:
    """404 model_not_found."""
    return SimError(
        404,
        f"The model `{model}` does not exist or you do not have access to it.",
        "invalid_request_error",
        None,
        "model_not_found",
    )


def server_error() -> SimError:
    """500 server_error (the real API's wording)."""
    return SimError(
        500,
        "The server had an error while processing your request. Sorry about that!",
        "server_error",
        None,
        None,
    )


def overloaded() -> SimError:
    """503 overloaded."""
    return SimError(503, "The server is overloaded or not ready yet.", "server_error", None, None)


_DEFAULTS = MappingProxyType({
    400: ("Simulated invalid request.", "invalid_request_error", None),
    401: ("Incorrect API key provided.", "invalid_request_error", "invalid_api_key"),
    403: ("You are not allowed to sample from this model.", "invalid_request_error", None),
    404: ("The model does not exist or you do not have access to it.", "invalid_request_error", "model_not_found"),
    409: ("Simulated conflict.", "invalid_request_error", None),
    422: ("Simulated unprocessable request.", "invalid_request_error", None),
    429: ("Rate limit reached (simulated). Please try again in 1s.", "requests", "rate_limit_exceeded"),
})


def error_for_status(status: int, message: Optional[str] = None, code: Optional[str] = None) -> SimError:
    """An OpenAI-looking error for an arbitrary status (used by fail rules).

    Example:
        >>> err = error_for_status(400)
        >>> err.status, err.type
        (400, 'invalid_request_error')
    """
    if status == 500:
        err = server_error()
    elif status == 503:
        err = overloaded()
    else:
        default = _DEFAULTS.get(status)
        if default is None:
            default = (
                ("Simulated server error.", "server_error", None)
                if status >= 500
                else ("Simulated error.", "invalid_request_error", None)
            )
        err = SimError(status, default[0], default[1], None, default[2])
    if message is not None:
        err.message = message
    if code is not None:
        err.code = code
    if status == 429:
        err.headers = {"retry-after": "1", "retry-after-ms": "1000"}
    return err

"""Database URLs given by users (MLflow backend stores, tracking URIs, Optuna storages): the driver filled
in, and a reachability probe that answers in seconds.

SQLAlchemy maps a plain `postgresql://` to psycopg (3), which fails where only psycopg2 is installed.
MLflow and Optuna retry an unreachable server for minutes; the probe connects once with a timeout.
"""

from __future__ import annotations

import base64
import importlib.util
import re
import urllib.request
from urllib.parse import unquote, urlsplit, urlunsplit

SERVER_DIALECTS = ("postgresql", "mysql")
POSTGRES_DRIVERS = (("psycopg", "psycopg"), ("psycopg2", "psycopg2"))  # (URL driver, module), preferred first


def with_driver(url: str) -> str:
    """`url` with an installed PostgreSQL driver named where it names none (other URLs unchanged)."""
    if not url.startswith("postgresql://"):
        return url
    for driver, module in POSTGRES_DRIVERS:
        if importlib.util.find_spec(module) is not None:
            return f"postgresql+{driver}://" + url[len("postgresql://"):]
    return url  # none installed: the probe says so in one line


# `scheme://user:password@`: the password is whatever lies between the user's colon and the `@` (an `@`, `/`,
# `?` or `#` inside a password must be percent-encoded, so none of them ends it early).
_URL_PASSWORD = re.compile(r"(?P<head>\b[A-Za-z][A-Za-z0-9+.\-]*://[^\s:/@?#]*):[^\s@/?#]*@")


# A password given as a query parameter (libpq's `?password=`, `&passwd=`, `;pwd=`): up to the next parameter
_QUERY_PASSWORD = re.compile(r"(?P<key>[?&;](?:password|passwd|pwd)=)[^\s&;#'\"]*", re.IGNORECASE)
_QUERY_PASSWORD_PARAMETER = re.compile(r"[?&;](?:password|passwd|pwd)=[^\s&;#'\"]*&?", re.IGNORECASE)


def hide_passwords(text: str) -> str:
    """`text` with every URL's password shown as `***`: the one redaction for anything printed, logged,
    tagged or written; any text, any scheme, never raises."""
    return _QUERY_PASSWORD.sub(r"\g<key>***", _URL_PASSWORD.sub(r"\g<head>:***@", text))


def leave_out_passwords(command: str) -> str:
    """`command` with every URL's password left out, for a command to paste, which then takes the password
    from the environment (a masked `***` would be sent as one)."""
    def drop(match: re.Match) -> str:  # `?password=x&a=1` -> `?a=1`, `&password=x&a=1` -> `&a=1`, `?password=x` -> ``
        return match.group(0)[0] if match.group(0).endswith("&") else ""

    return _QUERY_PASSWORD_PARAMETER.sub(drop, _URL_PASSWORD.sub(r"\g<head>@", command))


class HidingPasswords:
    """A text stream whose every write goes through `hide_passwords`, whichever library made the line."""

    def __init__(self, stream):
        self._stream = stream

    def write(self, text: str) -> int:
        self._stream.write(hide_passwords(text) if "@" in text or "=" in text else text)
        return len(text)

    def __getattr__(self, name: str):  # fileno, isatty, flush, buffer, encoding...: the stream's own
        return getattr(self._stream, name)


def redact(url: str) -> str:
    """`url` without its password, for messages, logs and MLflow tags."""
    import sqlalchemy

    from bioablate_core.errors import ConfigError

    try:
        return hide_passwords(sqlalchemy.engine.make_url(url).render_as_string(hide_password=True))
    except sqlalchemy.exc.ArgumentError:
        raise ConfigError(f"not a database URL: '{url}' (e.g. postgresql+psycopg2://user:pw@host/db or "
                          "sqlite:///path/optuna.db)") from None


def dialect(url: str) -> str:
    return url.split("://", 1)[0].split("+", 1)[0].lower()


# The pip package of each driver module SQLAlchemy may import for a server URL.
_DRIVER_PACKAGES = {"psycopg2": "psycopg2-binary", "psycopg": "'psycopg[binary]'", "pymysql": "pymysql",
                    "MySQLdb": "mysqlclient"}


def missing_driver(url: str, module: str) -> str:
    """How to install the driver `module` that `url` needs, in one line; for a plain `mysql://`, the
    pure-Python PyMySQL and the URL form that selects it (mysqlclient needs a C compiler)."""
    if module == "MySQLdb" and url.startswith("mysql://"):
        return (f"its driver is not installed (MySQLdb): pip install pymysql and write the URL as "
                f"{hide_passwords('mysql+pymysql://' + url[len('mysql://'):])}")
    package = _DRIVER_PACKAGES.get(module, module)
    return f"its driver is not installed ({module}): pip install {package}"


def unreachable(url: str, timeout_s: float) -> str | None:
    """Why the server database at `url` cannot be reached within `timeout_s` (one line), or None."""
    import sqlalchemy

    try:
        engine = sqlalchemy.create_engine(url, connect_args={"connect_timeout": max(1, round(timeout_s))},
                                          poolclass=sqlalchemy.pool.NullPool)
    except ModuleNotFoundError as error:
        return missing_driver(url, error.name or "")
    except Exception as error:  # noqa: BLE001 -- a malformed URL: one line
        return f"not a database URL ({' '.join(str(error).split())[:200]})"
    try:
        with engine.connect():
            return None
    except Exception as error:  # noqa: BLE001 -- refused, timed out, authentication: one line
        cause = getattr(error, "orig", None) or error
        return " ".join(str(cause).split())[:300]
    finally:
        engine.dispose()


def health_request(tracking_uri: str) -> tuple[urllib.request.Request, str]:
    """The probe of an MLflow server's /health and its address as shown; a `user:password@` is sent as basic
    authentication, as MLflow's client does, since urllib would take it for part of the host."""
    parts = urlsplit(tracking_uri.rstrip("/") + "/health")
    host = parts.hostname or ""
    netloc = (f"[{host}]" if ":" in host else host) + (f":{parts.port}" if parts.port else "")
    url = urlunsplit(parts._replace(netloc=netloc))
    request = urllib.request.Request(url)
    if parts.username is not None:
        user, password = unquote(parts.username), unquote(parts.password or "")
        request.add_header("Authorization", "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode())
    return request, url

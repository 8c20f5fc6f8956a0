"""Pure parts of the CLI: spec merging, output formatting, retry behaviour, config files."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import httpx
import pytest

from gpupaas_cli import exits, output, spec
from gpupaas_cli.client import ApiError, Client, NetworkError
from gpupaas_cli.config import Config, ConfigError, load, save


def test_flags_override_the_file_and_gpus_become_milli() -> None:
    body = spec.build_request(
        {"kind": "job", "name": "a", "gpu_class": "A100", "image": "pt", "gpu": 2, "replicas": 1},
        {"replicas": 4, "name": None, "command": ["python", "x.py"]},
    )
    assert body == {
        "kind": "training",
        "name": "a",
        "gpu_class": "A100",
        "image": "pt",
        "gpu_milli": 2000,
        "replicas": 4,
        "command": ["python", "x.py"],
    }


def test_half_a_gpu_is_500_milli() -> None:
    body = spec.build_request({}, {"kind": "notebook", "name": "n", "gpu_class": "c",
                                   "image": "i", "gpu": 0.5})  # fmt: skip
    assert body["gpu_milli"] == 500


@pytest.mark.parametrize(
    ("base", "message"),
    [
        ({"name": "x"}, "kind is notebook, job (training), sweep or endpoint (inference)"),
        ({"kind": "job", "name": "x", "image": "i", "gpu": 1}, "Missing: gpu_class."),
        ({"kind": "job", "name": "x", "image": "i", "gpu_class": "c"}, "gpu (or gpu_milli)"),
        ({"kind": "job", "name": "x", "image": "i", "gpu_class": "c", "gpu": "lots"}, "number"),
        (
            {"kind": "sweep", "name": "x", "image": "i", "gpu_class": "c", "gpu": 1, "grid": []},
            "grid must map",
        ),
    ],
)
def test_spec_errors_say_what_is_wrong(base: dict[str, Any], message: str) -> None:
    with pytest.raises(spec.SpecError, match=message.replace("(", r"\(").replace(")", r"\)")):
        spec.build_request(base, {})


def test_grid_and_env_flags_parse() -> None:
    assert spec.parse_grid(["lr=0.1, 0.01", "bs=32"]) == {"lr": ["0.1", "0.01"], "bs": ["32"]}
    assert spec.parse_pairs(["A=1", "B=x=y"], "--env") == {"A": "1", "B": "x=y"}
    with pytest.raises(spec.SpecError, match="NAME=VALUE"):
        spec.parse_pairs(["oops"], "--env")


def test_gpu_amounts_print_without_trailing_zeros() -> None:
    assert [output.gpus(m) for m in (1000, 500, 2500, 125, 0)] == ["1", "0.5", "2.5", "0.125", "0"]


def test_table_aligns_columns() -> None:
    assert output.table(["A", "LONG"], [["xx", 1], [None, "y"]]).splitlines() == [
        "A   LONG",
        "xx  1",
        "    y",
    ]


def test_config_file_is_created_0600_and_env_overrides_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPAAS_URL", raising=False)
    monkeypatch.delenv("GPUPAAS_TOKEN", raising=False)
    path = tmp_path / "sub" / "config.json"
    save(Config(url="https://gpu.example.com", token="gpp_a_b"), path)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert stat.S_IMODE(path.parent.stat().st_mode) == 0o700
    assert load(path) == Config(url="https://gpu.example.com", token="gpp_a_b")
    monkeypatch.setenv("GPUPAAS_TOKEN", "gpp_c_d")
    assert load(path).token == "gpp_c_d"


def test_missing_config_is_an_error_naming_the_fix(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GPUPAAS_URL", raising=False)
    monkeypatch.delenv("GPUPAAS_TOKEN", raising=False)
    with pytest.raises(ConfigError, match="gpupaas configure"):
        load(tmp_path / "none.json")


def _client(handler: Any, sleeps: list[float]) -> Client:
    client = Client(Config(url="http://api.test", token="t"), sleep=sleeps.append)
    client._http = httpx.Client(base_url="http://api.test", transport=httpx.MockTransport(handler))
    return client


def test_rate_limited_requests_wait_for_retry_after_then_succeed() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        if len(calls) == 1:
            return httpx.Response(429, headers={"Retry-After": "7"}, json={"code": "throttled",
                                  "message": "slow down", "fields": {}})  # fmt: skip
        return httpx.Response(200, json={"ok": True})

    sleeps: list[float] = []
    assert _client(handler, sleeps).get("/x") == {"ok": True}
    assert sleeps == [7.0]


def test_create_retries_a_dropped_connection_with_the_same_key() -> None:
    keys: list[str] = []

    def handler(request: httpx.Request) -> httpx.Response:
        keys.append(request.headers["Idempotency-Key"])
        if len(keys) == 1:
            raise httpx.ConnectError("connection reset")
        return httpx.Response(201, json={"id": 1})

    assert _client(handler, []).create("/w", {"a": 1}) == {"id": 1}
    assert len(keys) == 2
    assert keys[0] == keys[1]


def test_plain_post_is_not_retried_after_a_network_error() -> None:
    calls: list[int] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(1)
        raise httpx.ConnectError("refused")

    with pytest.raises(NetworkError):
        _client(handler, []).post("/w/1/cancel/")
    assert calls == [1]


def test_api_errors_carry_fields_and_the_exit_code() -> None:
    def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(400, json={"code": "invalid", "message": "bad",
                                         "fields": {"gpu_milli": ["whole GPUs"]}})  # fmt: skip

    with pytest.raises(ApiError) as caught:
        _client(handler, []).get("/x")
    assert caught.value.fields == {"gpu_milli": ["whole GPUs"]}
    assert caught.value.exit_code == exits.INVALID


def test_a_topology_ask_from_a_flag_or_a_spec_becomes_the_apis_field() -> None:
    base = {"kind": "job", "name": "a", "gpu_class": "c", "image": "i", "gpu": 1, "replicas": 4}
    assert spec.build_request(base, {"topology": "rack"})["topology"] == {
        "level": "rack",
        "required": False,
    }
    assert spec.build_request(base, {"topology": "block:required"})["topology"] == {
        "level": "block",
        "required": True,
    }
    from_file = {**base, "topology": {"level": "nvlink", "required": True}}
    assert spec.build_request(from_file, {})["topology"] == {"level": "nvlink", "required": True}
    with pytest.raises(spec.SpecError, match="LEVEL:required"):
        spec.build_request(base, {"topology": "rack:soon"})
    with pytest.raises(spec.SpecError, match="topology must be"):
        spec.build_request({**base, "topology": {"rack": True}}, {})

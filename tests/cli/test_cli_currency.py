"""Every cost the CLI prints names its currency, as the API gives it."""

from __future__ import annotations

from gpupaas_cli import output
from tests.cli.test_cli_live import CliFor
from tests.plugins.cast import Cast


def test_an_amount_carries_its_currency_when_the_server_names_one() -> None:
    assert output.money("9.00", "EUR") == "9.00 EUR"
    assert output.money("9.00", None) == "9.00"
    assert output.cost_header("COST/H", "EUR") == "COST/H (EUR)"
    assert output.cost_header("COST/H", None) == "COST/H"


def test_class_prices_and_usage_costs_name_the_currency(cast: Cast, cli_for: CliFor) -> None:
    cli = cli_for(cast.owner)
    gpus = cli("gpus")
    assert gpus.exit_code == 0, gpus.output
    assert gpus.stdout.splitlines()[0].split()[-2:] == ["COST/H", "(EUR)"]
    usage = cli("usage")
    assert usage.exit_code == 0, usage.output
    assert usage.stdout.splitlines()[1].split()[-2:] == ["COST", "(EUR)"]

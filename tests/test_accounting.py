"""Dated rate cards and cost accounting (SPEC R10, seed 001 L.1-L.6)."""
from __future__ import annotations

import datetime as dt

import pytest

from benchmark.score.accounting import CostTotal, Pricing, RateCard, efficiency, load_card, load_cards, price_usage
from benchmark.score.aggregate import Options, aggregate, load_verifier_usage
from benchmark.errors import ManifestError
from benchmark.run.records import RoleUsage
from tests.aggregate_helpers import rec, run_input, write_run, write_verification

LATE = dt.date(2026, 9, 30)


def card(date="2026-01-01", **models) -> RateCard:
    return RateCard.model_validate({"date": date, "source": "test", "currency_per_usd": {"EUR": 0.5}, "models": models})


def test_shipped_cards_reproduce_seed_001_figures():
    p = Pricing.from_dir()
    # GLM-5.3 (L.2): 65,455,719 in + 9,759,243 out at CNY 8/28 per million, 6.7219 CNY/USD -> $118.55, $0.58/task
    glm = p.price("zai/glm-5.3", 65_455_719, 9_759_243, LATE)
    assert glm.usd == pytest.approx(118.55, abs=0.005)
    assert glm.usd / 203 == pytest.approx(0.58, abs=0.005)
    # Astra (L.2) at standard rates: 8,944,538 in + 918,019 out at $10/$50 -> $135.35 (per-task usage below threshold)
    astra = CostTotal()
    for tin, tout in [(8_944_538 // 203, 918_019 // 203)] * 202 + [(8_944_538 - 202 * (8_944_538 // 203), 918_019 - 202 * (918_019 // 203))]:
        astra.add(p.price("openai/gpt-6-astra", tin, tout, LATE))
    assert astra.usd == pytest.approx(135.35, abs=0.005)
    # aliases resolve to the same entry
    assert p.price("glm-5.3", 1e6, 0, LATE).usd == pytest.approx(8 / 6.7219)


def test_shipped_cards_price_offline_models_at_zero_and_leave_unstated_models_unpriced():
    p = Pricing.from_dir()
    for m in ("local/smollm2", "scripted/oracle", "scripted/naive"):
        assert p.price(m, 5000, 5000, LATE).usd == 0.0
    gpt41 = p.price("openai/gpt-4.1", 5000, 5000, LATE)
    assert gpt41.usd is None and gpt41.unpriced and "not on the 2026-09-07 rate card" in gpt41.reason
    # Astra and GLM-5.3 receipts are dated 2026-09-07: before that they are unpriced
    assert p.price("openai/gpt-6-astra", 10, 10, dt.date(2026, 9, 6)).usd is None
    assert p.price("anthropic/claude-fable-5", 1e6, 1e6, dt.date(2026, 9, 6)).usd == pytest.approx(60.0)
    assert [c.card.date.isoformat() for c in load_cards()] == sorted(c.card.date.isoformat() for c in load_cards())


def test_card_in_force_is_latest_on_or_before_the_date():
    p = Pricing([card("2026-06-01", **{"m/a": {"input": 2, "output": 0}}), card("2026-01-01", **{"m/a": {"input": 1, "output": 0}})])
    assert p.price("m/a", 1e6, 0, dt.date(2026, 5, 31)).usd == pytest.approx(1.0)
    assert p.price("m/a", 1e6, 0, dt.date(2026, 6, 1)).usd == pytest.approx(2.0)
    none = p.price("m/a", 1e6, 0, dt.date(2025, 12, 31))
    assert none.usd is None and "no rate card in force" in none.reason


def test_long_context_multiplier_and_currency_conversion():
    c = card(**{"m/eu": {"input": 10, "output": 20, "currency": "EUR",
                         "long_context": {"threshold_tokens": 1000, "input_multiplier": 2, "output_multiplier": 1.5}}})
    # above threshold: (2000 x 10 x 2 + 1000 x 20 x 1.5) / 1e6 = 0.07 EUR; 0.5 EUR per USD -> 0.14 USD
    hi = price_usage(c, "m/eu", 2000, 1000)
    assert hi.long_context and hi.usd == pytest.approx(0.14)
    # at the threshold: no multiplier: (1000 x 10 + 1000 x 20) / 1e6 = 0.03 EUR -> 0.06 USD
    lo = price_usage(c, "m/eu", 1000, 1000)
    assert not lo.long_context and lo.usd == pytest.approx(0.06)


def test_peak_band_rates_used_when_billing_band_not_retained():
    c = card(**{"m/ds": {"input": 1, "output": 2, "peak_bands": [
        {"name": "peak", "start": "00:30", "end": "16:30", "input": 4, "output": 8}]}})
    assert price_usage(c, "m/ds", 1e6, 1e6).usd == pytest.approx(12.0)  # no timestamp: the schedule's peak
    assert price_usage(c, "m/ds", 1e6, 1e6, dt.datetime(2026, 1, 1, 20, 0)).usd == pytest.approx(3.0)
    assert price_usage(c, "m/ds", 1e6, 1e6, dt.datetime(2026, 1, 1, 9, 0)).usd == pytest.approx(12.0)


def test_glob_keys_exact_wins():
    c = card(**{"scripted/*": {"input": 0, "output": 0}, "scripted/special": {"input": 1, "output": 1}})
    assert price_usage(c, "scripted/oracle", 1e6, 0).usd == 0.0
    assert price_usage(c, "scripted/special", 1e6, 0).usd == pytest.approx(1.0)


def test_unpriced_model_is_never_zero():
    total = CostTotal()
    c = card(**{"m/a": {"input": 1, "output": 1}})
    total.add(price_usage(c, "m/a", 1e6, 0))
    total.add(price_usage(c, "m/missing", 1e6, 0))
    assert total.usd is None and total.unpriced_models == {"m/missing"}
    eff = efficiency(50.0, total, 10)
    assert eff["usd_per_task"] is None and eff["usd_per_qpt"] is None and eff["unpriced_models"] == ["m/missing"]
    assert eff["q_per_mtok"] == pytest.approx(25.0)


def test_table1_efficiency_columns():
    total = CostTotal()
    total.add(price_usage(card(**{"m/a": {"input": 1, "output": 3}}), "m/a", 3e6, 1e6))  # $6 over 4M tokens
    eff = efficiency(80.0, total, 3)
    assert eff["tokens_m"] == pytest.approx(4.0)
    assert eff["q_per_mtok"] == pytest.approx(20.0)
    assert eff["usd_per_task"] == pytest.approx(2.0)
    assert eff["usd_per_qpt"] == pytest.approx(2.0 / 80.0)


def test_bad_cards_fail_with_file_field_and_reason(tmp_path):
    bad = tmp_path / "2026-01-01.yaml"
    bad.write_text("date: 2026-01-01\nsource: s\nmodels:\n  m/a:\n    input: 1\n    output: 1\n    currency: JPY\n")
    with pytest.raises(ManifestError, match="JPY has no conversion rate"):
        load_card(bad)
    neg = tmp_path / "neg.yaml"
    neg.write_text("date: 2026-01-01\nsource: s\nmodels:\n  m/a:\n    input: -1\n    output: 1\n")
    with pytest.raises(ManifestError, match="models.m/a.input"):
        load_card(neg)
    bad.write_text("date: 2026-01-01\nsource: s\nmodels: {}\n")
    neg.unlink()  # in a pricing folder every card is named after its date
    (tmp_path / "2026-01-01-second.yaml").write_text("date: 2026-01-01\nsource: s2\nmodels: {}\n")
    with pytest.raises(ManifestError, match="one card per date"):
        load_cards(tmp_path)


def test_agent_headline_excludes_reviewer_judge_and_verifier_usage(tmp_path):
    c = card(**{"m/a": {"input": 1, "output": 0}, "m/rev": {"input": 10, "output": 0}, "m/ver": {"input": 100, "output": 0}})
    r = rec("a.L3.x", "a", "L3", 50.0, model="m/a", tokens_in=1_000_000, eligible=True,
            role_usage={"reviewer": RoleUsage(tokens_in=1_000_000, calls=3, model="m/rev"),
                        "judge": RoleUsage(tokens_in=1_000_000, calls=1, model="m/unknown-judge")})
    d = write_run(tmp_path, "runv", [r], "m/a")
    write_verification(d, [{"key": "a.L3.x__r0", "usage": {"tokens_in": 1_000_000, "tokens_out": 0, "calls": 1, "model": "m/ver"}},
                           {"key": "a.L3.x__r0", "usage": {"tokens_in": 500_000, "tokens_out": 0, "calls": 1, "model": "m/ver"}}])
    ver = load_verifier_usage(d)
    assert sum(u.tokens_in for u in ver["a.L3.x__r0"]) == 1_500_000
    data = aggregate([run_input([r], verifier=ver)], {}, Pricing([c]), Options(bootstrap_draws=10, permutation_draws=10))
    acc = data["models"][0]["accounting"]
    assert acc["usd_total"] == pytest.approx(1.0)  # agent only
    assert acc["agent"]["tokens_in"] == 1_000_000 and acc["agent"]["calls"] == 1
    assert acc["roles"]["reviewer"]["usd"] == pytest.approx(10.0) and acc["roles"]["reviewer"]["calls"] == 3
    assert acc["roles"]["verifier"]["usd"] == pytest.approx(150.0)
    assert acc["roles"]["judge"]["usd"] is None and acc["roles"]["judge"]["unpriced_models"] == ["m/unknown-judge"]
    assert load_verifier_usage(tmp_path / "nothing") == {}

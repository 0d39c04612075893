"""Model providers through the real litellm path: the local LLM (real tokens) and the scripted agents."""
import json


from benchmark.agent import call_model
from benchmark.models.scripted import first_option_value
from tests.helpers import L1_SCHEMA


def test_local_smollm2_answers_with_real_token_counts():
    resp, rec = call_model("local/smollm2", [{"role": "user", "content": "Say hello in one word."}], step=0, max_tokens=16)
    assert rec.ok and resp is not None, rec.error
    assert rec.tokens_in > 5 and 0 < rec.tokens_out <= 16
    assert isinstance(resp.choices[0].message.content, str)


def test_local_smollm2_json_mode_gives_json():
    resp, rec = call_model("local/smollm2", [{"role": "user", "content": "Return a JSON object with key a set to 1."}],
                           step=0, response_format={"type": "json_object"}, max_tokens=48)
    assert rec.ok, rec.error
    assert isinstance(json.loads(resp.choices[0].message.content), dict)


def test_unknown_model_is_a_recorded_error_not_a_crash():
    resp, rec = call_model("local/does-not-exist", [{"role": "user", "content": "hi"}], step=0)
    assert resp is None and not rec.ok and "does-not-exist" in rec.error
    assert rec.tokens_in == rec.tokens_out == 0


def test_scripted_first_takes_first_options():
    rep = first_option_value(L1_SCHEMA)
    assert rep["assessment"] == "usable" and rep["issues"] == [] and set(rep) == set(L1_SCHEMA["required"])
    resp, rec = call_model("scripted/first", [{"role": "user", "content": "x"}], step=0, metadata={"report_schema": L1_SCHEMA})
    assert rec.ok and json.loads(resp.choices[0].message.content) == rep
    assert rec.tokens_in == 0 and rec.tokens_out == 0


def test_scripted_agent_needs_a_world():
    resp, rec = call_model("scripted/oracle", [{"role": "user", "content": "x"}], step=0)
    assert resp is None and "world_id" in rec.error

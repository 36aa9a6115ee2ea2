"""`score --tasks --dask`: lm-evaluation-harness task files answered on a Dask cluster write the local run's bytes:
the stdout records, the samples files and the results file but its timestamps and timings. The requests are cut
into many small tasks (`--shard-size 100`), so a few-shot prefix's contexts and a task's documents land on both
workers; options that do not combine are usage errors."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.conftest import REPO, run_cli

distributed = pytest.importorskip("distributed", reason="dask.distributed is not installed (nlpkit[dask])")
pytest.importorskip("datasets")
pytest.importorskip("yaml")

SUITE = "tests/fixtures/tasks/suite"
GPT2 = "tests/fixtures/score/models/gpt2-bpe"
TIMES = ("date", "total_evaluation_time_seconds", "start_time", "end_time")
CHATML = ("{% for message in messages %}<|im_start|>{{ message['role'] }}\n{{ message['content'] }}<|im_end|>\n"
          "{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\n{% endif %}")


@pytest.fixture(scope="module")
def cluster():
    import logging

    c = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0",
                                 silence_logs=logging.ERROR)
    yield c
    c.close()


def _tasks(*args: str, out=None, env=None):
    more = ["--output-path", str(out), "--log-samples"] if out is not None else []
    res = run_cli("score", "--include-path", SUITE, "--format", "jsonl", *args, *more, env=env)
    assert res.returncode == 0, res.stderr.decode()
    return res


def _files(out) -> dict:
    """The run's files by kind (results, samples_<task>), their timestamp left out of the name."""
    return {f.name.rsplit("_", 1)[0]: f for f in out.rglob("*.json*")}


def _without_times(path) -> dict:
    doc = json.loads(path.read_text())
    return {k: v for k, v in doc.items() if k not in TIMES}


def _same_files(one, two) -> None:
    a, b = _files(one), _files(two)
    assert set(a) == set(b) and len(a) > 1
    for name in a:
        if name == "results":
            assert _without_times(a[name]) == _without_times(b[name])
        else:
            assert a[name].read_bytes() == b[name].read_bytes(), name


@pytest.mark.parametrize("model, tasks", [
    ("default", "suite_mc_first_n,suite_mc"),       # multiple_choice: a first_n prefix shared across tasks
    (GPT2, "suite_rolling,suite_ll"),                # loglikelihood_rolling and loglikelihood
    (GPT2, "suite_gen,suite_gen_prefix"),            # generate_until, repeats and a majority vote
    ("tests/fixtures/ngram/kenlm-3.arpa.gz", "suite_mc,suite_gen"),   # an n-gram model: no prefix to share
])
def test_tasks_on_dask_write_the_local_runs_bytes(cluster, tmp_path, model, tasks):
    args = ("-m", model, "--tasks", tasks, "--limit", "6")
    local = _tasks(*args, out=tmp_path / "local")
    dask = _tasks(*args, "--dask", cluster.scheduler_address, "--shard-size", "100", "--quiet",
                  out=tmp_path / "dask")
    assert dask.stdout == local.stdout and b'"record": "summary"' in local.stdout
    _same_files(tmp_path / "local", tmp_path / "dask")


def test_auto_shard_size_on_a_local_cluster_and_two_models(tmp_path):
    """`--dask local:2` (no --shard-size: auto), two models compared per task: the same records."""
    args = ("-m", GPT2, "-m", "tests/fixtures/score/models/llama-spm", "--tasks", "suite_mc,suite_gen", "--limit", "4")
    local = _tasks(*args)
    dask = _tasks(*args, "--dask", "local:2")
    assert dask.stdout == local.stdout
    assert b"dask LocalCluster with 2 worker(s)" in dask.stderr


def test_tasks_read_no_stdin_so_dask_takes_no_files(cluster):
    """--tasks reads task files, never stdin: --dask has no "not stdin" complaint, and text piped in is ignored."""
    args = ("score", "-m", GPT2, "--tasks", "suite_mc", "--include-path", SUITE, "--limit", "2", "--format", "jsonl")
    res = run_cli(*args, "--dask", cluster.scheduler_address, "--quiet", input='{"context": "a"}\n')
    assert res.returncode == 0, res.stderr.decode()
    assert res.stdout == run_cli(*args).stdout


def test_the_environment_address_runs_tasks_on_dask(cluster):
    args = ("-m", GPT2, "--tasks", "suite_rolling", "--limit", "3")
    dask = _tasks(*args, "--quiet", env={"NLPKIT_DASK": cluster.scheduler_address})
    assert dask.stdout == _tasks(*args).stdout


def test_the_model_of_the_drivers_environment_is_the_one_the_workers_load(cluster):
    """No -m: $NLPKIT_MODEL of the driver (a relative path), which the workers' environment does not have."""
    args = ("--tasks", "suite_rolling", "--limit", "3")
    env = {"NLPKIT_MODEL": GPT2}
    dask = _tasks(*args, "--dask", cluster.scheduler_address, "--quiet", env=env)
    assert dask.stdout == _tasks(*args, env=env).stdout != _tasks(*args).stdout


def test_item_files_on_dask_score_the_drivers_environment_model_too(cluster):
    """`score FILE --dask` without -m: the workers load $NLPKIT_MODEL of the driver, not of their own environment."""
    args = ("score", "tests/fixtures/score/ll.jsonl", "--format", "jsonl")
    env = {"NLPKIT_MODEL": GPT2}
    dask = run_cli(*args, "--dask", cluster.scheduler_address, "--quiet", env=env)
    assert dask.returncode == 0, dask.stderr.decode()
    assert dask.stdout == run_cli(*args, env=env).stdout != run_cli(*args).stdout


def test_chat_renders_here_and_scores_on_the_workers(cluster, tmp_path):
    model = tmp_path / "gpt2-chat"
    shutil.copytree(REPO / GPT2, model)
    cfg = json.loads((model / "tokenizer_config.json").read_text())
    (model / "tokenizer_config.json").write_text(json.dumps({**cfg, "chat_template": CHATML}))
    args = ("-m", str(model), "--tasks", "suite_mc,suite_gen_prefix", "--limit", "3", "--chat", "--system", "Be brief.")
    local = _tasks(*args, out=tmp_path / "local")
    dask = _tasks(*args, "--dask", cluster.scheduler_address, "--shard-size", "200", "--quiet",
                  out=tmp_path / "dask")
    assert dask.stdout == local.stdout
    _same_files(tmp_path / "local", tmp_path / "dask")


def test_a_multiple_input_task_on_dask_gives_the_local_runs_samples(cluster, tmp_path):
    """A document's contexts share their common start (`prefix_scoring.document_split`) on a worker as here: the
    same log-likelihoods, bit for bit (the results' configs name the hooks' addresses, another per process)."""
    args = ("-m", "default", "--tasks", "suite_wino", "--limit", "6")
    local = _tasks(*args, out=tmp_path / "local")
    dask = _tasks(*args, "--dask", cluster.scheduler_address, "--shard-size", "100", "--quiet", out=tmp_path / "dask")
    assert dask.stdout == local.stdout and b'"record": "summary"' in local.stdout
    a, b = _files(tmp_path / "local"), _files(tmp_path / "dask")
    assert a["samples_suite_wino"].read_bytes() == b["samples_suite_wino"].read_bytes()


def test_results_cache_in_front_of_the_workers(cluster, tmp_path):
    """Misses are computed on the cluster and stored; a rerun without --dask takes every result from the cache."""
    args = ("-m", GPT2, "--tasks", "suite_mc,suite_rolling", "--limit", "3")
    env = {"NLPKIT_RESULTS_CACHE": str(tmp_path / "rc")}
    first = _tasks(*args, "--dask", cluster.scheduler_address, "--shard-size", "100", env=env)
    assert "0 of 15 results from the cache, 15 computed" in first.stderr.decode()
    again = _tasks(*args, env=env)
    assert "15 of 15 results from the cache, 0 computed" in again.stderr.decode()
    assert again.stdout == first.stdout == _tasks(*args).stdout


def test_a_partly_cached_run_on_dask_scores_its_misses_with_the_whole_runs_prefixes(cluster, tmp_path):
    """Documents 0-6 cached; 7, missed, alone on the cluster: its prefix is the one the whole run shares."""
    env = {"NLPKIT_RESULTS_CACHE": str(tmp_path / "rc")}
    args = ("-m", "default", "--tasks", "suite_mc_first_n", "--dask", cluster.scheduler_address, "--quiet")
    _tasks(*args, "--limit", "7", out=tmp_path / "first", env=env)
    _tasks(*args, "--limit", "8", out=tmp_path / "partly", env=env)
    _tasks("-m", "default", "--tasks", "suite_mc_first_n", "--limit", "8", out=tmp_path / "fresh")

    def doc7(out):
        return [s for s in map(json.loads, _files(out)["samples_suite_mc_first_n"].read_text().splitlines())
                if s["doc_id"] == 7]

    assert doc7(tmp_path / "partly") == doc7(tmp_path / "fresh")


@pytest.mark.parametrize("extra, code, says", [
    (["--dask", "tcp://127.0.0.1"], 2, "expected tcp://HOST:PORT"),
    (["--dask", "nowhere"], 2, "expected local, local:N"),
    (["--dask", "local:2", "ITEMS"], 2, "give either item FILES or --tasks"),
])
def test_bad_combinations_are_one_line_errors(tmp_path, extra, code, says):
    items = tmp_path / "i.jsonl"
    items.write_text('{"context": "a", "continuation": " b"}\n')
    extra = [str(items) if e == "ITEMS" else e for e in extra]
    res = run_cli("score", "-m", GPT2, "--tasks", "suite_mc", "--include-path", SUITE, "--limit", "2", *extra)
    assert res.returncode == code, res.stderr.decode()
    assert says in res.stderr.decode() and "Traceback" not in res.stderr.decode()


def test_verbose_says_what_the_workers_loaded(cluster):
    res = _tasks("-m", GPT2, "--tasks", "suite_mc", "--limit", "2", "-v", "--dask", cluster.scheduler_address)
    assert "nlpkit: model gpt2-bpe: gpt2," in res.stderr.decode()


def test_a_rolling_task_with_an_ngram_model_is_refused_on_dask_too(cluster):
    """The window comes from a worker: an n-gram model has none, and its rolling task is one error line."""
    res = run_cli("score", "-m", "tests/fixtures/ngram/kenlm-3.arpa.gz", "--tasks", "suite_rolling",
                  "--include-path", SUITE, "--dask", cluster.scheduler_address)
    assert res.returncode == 1 and "loglikelihood_rolling" in res.stderr.decode()
    assert "Traceback" not in res.stderr.decode()


def test_shard_size_without_dask_is_ignored_with_a_warning():
    res = _tasks("-m", GPT2, "--tasks", "suite_mc", "--limit", "2", "--shard-size", "1k")
    assert "--shard-size applies to --dask only" in res.stderr.decode()


def test_cluster_map_plans_whole_units():
    """Units (the requests of one context) are never cut: tasks of about --shard-size bytes, or with auto two tasks
    per worker (generations: one, decoded in one batch)."""
    from nlpkit.distributed.stages import ClusterMap

    class TwoWorkers:
        def scheduler_info(self):
            return {"workers": {"a": {}, "b": {}}}

    sizes = [30, 80, 10, 10, 200, 5]
    assert ClusterMap(TwoWorkers(), 100).plan(sizes) == [range(0, 2), range(2, 5), range(5, 6)]
    assert ClusterMap(TwoWorkers(), None).plan(sizes) == [range(0, 2), range(2, 4), range(4, 6)]
    assert ClusterMap(TwoWorkers(), None).plan(sizes, per_worker=1) == [range(0, 3), range(3, 6)]
    assert ClusterMap(TwoWorkers(), None).plan([]) == []

import pytest

from infrarsi.llm import DEFAULT_MODEL, LLMConfig, load_llm_config, make_client


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_nothing_configured_means_no_key_and_defaults(tmp_path):
    config = load_llm_config(tmp_path, env={}, home=tmp_path / "home")
    assert not config.configured and config.model == DEFAULT_MODEL and config.warnings == ()


def test_environment_beats_repo_file_beats_user_file(tmp_path):
    repo, home = tmp_path / "repo", tmp_path / "home"
    write(home / ".infrarsi/config.toml", '[anthropic]\nmodel = "user-model"\napi_key = "user-key"\nmax_retries = 5\n')
    write(repo / ".infrarsi/config.toml", '[anthropic]\nmodel = "repo-model"\ntimeout_s = 12\n')
    config = load_llm_config(repo, env={"ANTHROPIC_API_KEY": "env-key", "ANTHROPIC_BASE_URL": "http://127.0.0.1:9"},
                             home=home)
    assert (config.api_key, config.model, config.base_url) == ("env-key", "repo-model", "http://127.0.0.1:9")
    assert (config.timeout_s, config.max_retries) == (12.0, 5)
    env_model = load_llm_config(repo, env={"INFRARSI_ANTHROPIC_MODEL": "env-model"}, home=home)
    assert (env_model.model, env_model.api_key) == ("env-model", "user-key")


def test_invalid_values_fall_back_to_defaults_with_a_warning(tmp_path):
    write(tmp_path / ".infrarsi/config.toml", '[anthropic]\ntimeout_s = -1\nmax_retries = 1.5\n')
    config = load_llm_config(tmp_path, env={"INFRARSI_LLM_MAX_RETRIES": "many"}, home=tmp_path / "home")
    assert (config.timeout_s, config.max_retries) == (LLMConfig().timeout_s, LLMConfig().max_retries)
    assert len(config.warnings) == 3 and any("timeout_s=-1" in w for w in config.warnings)


def test_an_unreadable_file_is_named_and_ignored(tmp_path):
    write(tmp_path / ".infrarsi/config.toml", "[anthropic\n")
    config = load_llm_config(tmp_path, env={}, home=tmp_path / "home")
    assert "unreadable" in config.warnings[0]


def test_the_client_gets_every_setting_explicitly():
    client = make_client(LLMConfig(api_key="k", base_url="http://127.0.0.1:9", timeout_s=3, max_retries=4))
    assert (client.api_key, str(client.base_url), client.timeout, client.max_retries) == \
        ("k", "http://127.0.0.1:9", 3, 4)
    with pytest.raises(ValueError, match="ANTHROPIC_API_KEY"):
        make_client(LLMConfig())


def test_a_repository_config_cannot_choose_where_the_key_goes(tmp_path, make_context, monkeypatch):
    """A repo's .infrarsi/config.toml naming base_url (and a key) is ignored with a warning: the user's
    key never reaches the server the repo named, not even once."""
    from infrarsi.priors import default_provider
    from tests.support.messages_server import MessagesServer

    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)  # the client's own fallback
    with MessagesServer() as server:
        repo = tmp_path / "repo"
        write(repo / ".infrarsi/config.toml", f'[anthropic]\nbase_url = "{server.url}"\napi_key = "sk-repo"\n')
        env = {"ANTHROPIC_API_KEY": "sk-user", "INFRARSI_LLM_MAX_RETRIES": "0", "INFRARSI_LLM_TIMEOUT_S": "2"}
        config = load_llm_config(repo, env=env, home=tmp_path / "home")
        assert config.base_url is None and config.api_key == "sk-user"
        ignored = [w for w in config.warnings if "ignored in a repository's config" in w]
        assert len(ignored) == 2 and any("base_url" in w for w in ignored) and any("api_key" in w for w in ignored)
        default_provider(config).priors(make_context("cpu"))
        assert server.requests == []


def test_the_user_config_may_name_base_url_and_key(tmp_path):
    home = tmp_path / "home"
    write(home / ".infrarsi/config.toml", '[anthropic]\nbase_url = "http://127.0.0.1:9"\napi_key = "sk-user"\n')
    config = load_llm_config(tmp_path / "repo", env={}, home=home)
    assert (config.base_url, config.api_key, config.warnings) == ("http://127.0.0.1:9", "sk-user", ())

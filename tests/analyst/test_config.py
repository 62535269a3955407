"""Federation file parsing: paths, tokens, TLS requirements and clear errors."""

import pytest

from analyst.config import SiteConfig, load_federation_file


def write(tmp_path, text):
    p = tmp_path / "federation.toml"
    p.write_text(text)
    return p


def test_reads_sites_with_relative_paths_and_token_file(tmp_path):
    (tmp_path / "ca.pem").write_text("x")
    (tmp_path / "a.token").write_text("secret-a\n")
    p = write(tmp_path, """
[options]
timeout = 12

[[sites]]
name = "a"
address = "127.0.0.1:5001"
token_file = "a.token"
ca_file = "ca.pem"

[[sites]]
name = "b"
address = "localhost:5002"
token = "secret-b"
insecure = true
""")
    sites, options = load_federation_file(p)
    assert [s.name for s in sites] == ["a", "b"]
    assert sites[0].token == "secret-a"
    assert sites[0].ca_file == tmp_path / "ca.pem"
    assert sites[1].insecure is True and sites[1].ca_file is None
    assert options == {"timeout": 12}


@pytest.mark.parametrize("entry, match", [
    ('name = "a"\naddress = "nohost"\ntoken = "t"\ninsecure = true', "address"),
    ('name = "a"\naddress = "h:1"\ninsecure = true', "token"),
    ('name = "a"\naddress = "h:1"\ntoken = "t"', "ca_file"),
    ('name = "a"\naddress = "h:1"\ntoken = "t"\ninsecure = "yes"', "insecure"),
    ('name = "a"\naddress = "h:1"\ntoken = "t"\ninsecure = true\nport = 3', "unknown key"),
    ('name = "a"\naddress = "h:1"\ntoken = "t"\nca_file = "missing.pem"', "ca_file"),
])
def test_bad_site_entries_name_the_field(tmp_path, entry, match):
    p = write(tmp_path, "[[sites]]\n" + entry + "\n")
    with pytest.raises(ValueError, match=match):
        load_federation_file(p)


def test_missing_file_and_empty_federation(tmp_path):
    with pytest.raises(ValueError, match="not found"):
        load_federation_file(tmp_path / "nope.toml")
    with pytest.raises(ValueError, match="at least one"):
        load_federation_file(write(tmp_path, "[options]\ntimeout = 1\n"))
    with pytest.raises(ValueError, match="not valid TOML"):
        load_federation_file(write(tmp_path, "[[sites]\n"))


def test_client_cert_and_key_go_together(tmp_path):
    (tmp_path / "c.pem").write_text("x")
    with pytest.raises(ValueError, match="together"):
        SiteConfig(name="a", address="h:1", token="t", insecure=True, client_cert=tmp_path / "c.pem")


def test_federation_options_are_validated(tmp_path):
    from analyst import Federation

    site = SiteConfig(name="a", address="127.0.0.1:1", token="t", insecure=True)
    for bad in ({"timeout": "10"}, {"timeout": 0}, {"retries": -1}, {"retries": 1.5}):
        with pytest.raises(ValueError, match=next(iter(bad))):
            Federation([site], **bad)
    with pytest.raises(ValueError, match="unique"):
        Federation([site, site])
    p = write(tmp_path, '[options]\nwait = 3\n[[sites]]\nname = "a"\naddress = "h:1"\ntoken = "t"\ninsecure = true\n')
    with pytest.raises(ValueError, match="wait"):
        load_federation_file(p)

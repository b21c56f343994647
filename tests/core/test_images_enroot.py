"""Every image spelling the benchmark repo uses: enroot `registry#repo:tag`, digests, ghcr, Docker Hub."""

# ruff: noqa: E501  (a table of real image references reads best one per line)

from __future__ import annotations

import pytest
import yaml

from app.adapters.registry import parse_image
from app.core.recipes import InvalidImageError, current_image, parse_master, set_image, validate_image
from tests.recipe_helpers import MASTER_FILES, fixture_text

ENROOT_KEY = "dsv4-fp4-gb300-dynamo-trt-mtp"
ENROOT_PIN = "nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.3.0-deepseek-v4-dev.1"
ENROOT_NEXT = "nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime:1.3.0-deepseek-v4-dev.2"


def _changed(old: str, new: str) -> list[tuple[str, str]]:
    a, b = old.splitlines(keepends=True), new.splitlines(keepends=True)
    assert len(a) == len(b)
    return [(x, y) for x, y in zip(a, b, strict=True) if x != y]


def test_the_real_enroot_pin_is_read_and_bumped_on_one_line() -> None:
    text = fixture_text("nvidia-master.dsv4-gb300-trt-mtp.head.yaml")
    assert current_image(text, ENROOT_KEY) == ENROOT_PIN
    new = set_image(text, ENROOT_KEY, ENROOT_NEXT)
    assert _changed(text, new) == [(f"  image: {ENROOT_PIN}\n", f"  image: {ENROOT_NEXT}\n")]
    assert parse_master(new)[ENROOT_KEY] == {**parse_master(text)[ENROOT_KEY], "image": ENROOT_NEXT}


@pytest.mark.parametrize("name", MASTER_FILES)
def test_every_key_takes_an_enroot_image_on_exactly_one_line(name: str) -> None:
    text = fixture_text(name)
    master = parse_master(text)
    for i, key in enumerate(master):
        new = set_image(text, key, ENROOT_NEXT)  # verifies its own edit event by event
        ((before, after),) = _changed(text, new)
        assert after.strip() == f"image: {ENROOT_NEXT}", key
        if i == 0:  # an independent reading: `#` after a non-space starts no comment
            assert (
                yaml.load(new, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))[key]["image"]
                == ENROOT_NEXT
            )


@pytest.mark.parametrize(
    ("ref", "host", "repository", "tag", "image_repo", "pullable"),
    [
        (ENROOT_PIN, "nvcr.io", "nvidia/ai-dynamo/tensorrtllm-runtime", "1.3.0-deepseek-v4-dev.1",
         "nvcr.io#nvidia/ai-dynamo/tensorrtllm-runtime", "nvcr.io/nvidia/ai-dynamo/tensorrtllm-runtime:1.3.0-deepseek-v4-dev.1"),
        ("ghcr.io#org/image:tag", "ghcr.io", "org/image", "tag", "ghcr.io#org/image", "ghcr.io/org/image:tag"),
        ("nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc23.post1", "nvcr.io", "nvidia/tensorrt-llm/release",
         "1.3.0rc23.post1", "nvcr.io/nvidia/tensorrt-llm/release", "nvcr.io/nvidia/tensorrt-llm/release:1.3.0rc23.post1"),
        ("vllm/vllm-openai:nightly-dev-arm64-cu13.0.1-75c2eef", "docker.io", "vllm/vllm-openai",
         "nightly-dev-arm64-cu13.0.1-75c2eef", "vllm/vllm-openai", "docker.io/vllm/vllm-openai:nightly-dev-arm64-cu13.0.1-75c2eef"),
        ("localhost:5000#team/img:1", "localhost:5000", "team/img", "1", "localhost:5000#team/img", "localhost:5000/team/img:1"),
    ],
)  # fmt: skip
def test_parse_image_reads_the_registry_before_the_hash(
    ref: str, host: str, repository: str, tag: str, image_repo: str, pullable: str
) -> None:
    got = parse_image(ref)
    assert (got.host, got.repository, got.tag, got.image_repo, got.pullable) == (
        host, repository, tag, image_repo, pullable,
    )  # fmt: skip
    assert got.with_tag(tag) == ref  # a bump writes the pin back in the repo's own spelling
    assert "#" not in got.host


def test_a_digest_pin_keeps_its_digest() -> None:
    ref = "lmsysorg/sglang:v0.5.14-cu130@sha256:5027e95bf6ec536856b1b52a91d1f35ff5c564ab83e8a94758a169ff09bb8df3"
    got = parse_image(ref)
    assert (got.repository, got.tag, got.digest) == ("lmsysorg/sglang", "v0.5.14-cu130", ref.split("@")[1])


@pytest.mark.parametrize("ref", ["nvidia#x/y:1", "#nvidia/x:1", "nvcr.io#a#b:1", "nvcr.io/x#y:1"])
def test_malformed_enroot_references_are_refused_with_the_fix(ref: str) -> None:
    with pytest.raises(ValueError, match="registry#repo/path:tag"):
        parse_image(ref)
    with pytest.raises(InvalidImageError, match="registry#repo"):
        validate_image(ref)


def test_every_real_pin_parses_and_round_trips() -> None:
    for name in MASTER_FILES:
        for key, entry in parse_master(fixture_text(name)).items():
            ref = parse_image(entry["image"])
            assert validate_image(entry["image"]) == entry["image"], key
            if ref.tag and not ref.digest:
                assert ref.with_tag(ref.tag) == entry["image"], key


def test_tags_of_an_enroot_image_are_listed_from_the_registry_before_the_hash() -> None:
    from app.adapters.registry import OciClient, client_for

    ref = parse_image(ENROOT_PIN)
    client = client_for(ref, trusted_hosts={"nvcr.io"})  # as when the default branch pins it
    try:
        assert isinstance(client, OciClient) and client.base_url == "https://nvcr.io"
    finally:
        client.close()
    assert ref.repository == "nvidia/ai-dynamo/tensorrtllm-runtime"  # the path listed on that registry

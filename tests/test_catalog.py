"""Catalog data: every row parses, cross-references resolve, and SageMaker names exist in AWS's own API model."""

from __future__ import annotations

from importlib import resources

import botocore.loaders
import pytest
import yaml

from blueprints.catalog import CatalogModel, Gpu, InstanceType, SageMakerImage, load_catalog


def _raw(name: str) -> dict:
    return yaml.safe_load(resources.files("blueprints.catalog").joinpath(name).read_text(encoding="utf-8"))


GPU_ROWS = _raw("gpus.yaml")["gpus"]
INSTANCES = _raw("instances.yaml")
EC2_ROWS = INSTANCES["ec2"]
SAGEMAKER_ROWS = INSTANCES["sagemaker"]
MODEL_ROWS = _raw("models.yaml")["models"]


def _sagemaker_instance_enum() -> set[str]:
    """ProductionVariantInstanceType from botocore's bundled SageMaker service model (offline)."""
    model = botocore.loaders.Loader().load_service_model("sagemaker", "service-2")
    return set(model["shapes"]["ProductionVariantInstanceType"]["enum"])


@pytest.mark.parametrize("row", GPU_ROWS, ids=lambda r: r["name"])
def test_every_gpu_row_parses(row):
    assert Gpu.model_validate(row).name == row["name"]


@pytest.mark.parametrize("row", EC2_ROWS + SAGEMAKER_ROWS, ids=lambda r: r["instance_type"])
def test_every_instance_row_parses_and_names_a_catalogued_gpu(row):
    inst = InstanceType.model_validate(row)
    gpu_names = {g["name"] for g in GPU_ROWS}
    assert inst.gpu is None or inst.gpu in gpu_names
    assert (inst.gpu is None) == (inst.gpu_count == 0)


@pytest.mark.parametrize("row", MODEL_ROWS, ids=lambda r: r["id"])
def test_every_model_row_parses_with_a_source(row):
    model = CatalogModel.model_validate(row)
    assert model.source.startswith("https://")


@pytest.mark.parametrize("row", SAGEMAKER_ROWS, ids=lambda r: r["instance_type"])
def test_every_sagemaker_instance_type_exists_in_botocores_sagemaker_model(row):
    assert row["instance_type"] in _sagemaker_instance_enum()


@pytest.mark.parametrize("row", INSTANCES["sagemaker_images"], ids=lambda r: r["engine"])
def test_sagemaker_images_are_pinned_and_give_a_region_uri(row):
    image = SageMakerImage.model_validate(row)
    assert image.tag != "latest"
    assert all(len(account) == 12 and account.isdigit() for account in image.registry_accounts.values())
    assert image.uri("us-east-1").startswith(f"{image.registry_accounts['us-east-1']}.dkr.ecr.us-east-1.amazonaws.com/")


@pytest.mark.parametrize("row", [r for r in EC2_ROWS if r["gpu"] is None], ids=lambda r: r["instance_type"])
def test_every_cpu_instance_has_a_per_vcpu_throughput_figure(row, catalog):
    assert catalog.cpu_gflops(catalog.instance(row["instance_type"])) > 0


def test_cpu_throughput_figures_are_marked_unverified():
    assert "[unverified]" in INSTANCES["cpu_gflops_source"]


def test_sagemaker_prices_are_above_ec2_for_the_same_hardware(catalog):
    # sizing-facts.md: SageMaker hosting is roughly 25-40 % above EC2; ml.p4d is ~72 % above since EC2's mid-2025
    # P4 price cut (the SageMaker quote predates it).
    for name, sm in catalog.sagemaker.items():
        ec2 = catalog.ec2.get(name.removeprefix("ml."))
        if ec2 is not None:
            assert 1.0 < sm.usd_per_hour / ec2.usd_per_hour < 1.75, name


def test_a_known_instance_is_returned_with_its_price(catalog):
    assert catalog.instance("g6e.xlarge").usd_per_hour == 1.861
    assert catalog.instance("ml.g5.xlarge").usd_per_hour == 1.408


def test_unknown_names_suggest_close_matches(catalog):
    from blueprints.core.errors import CatalogError

    with pytest.raises(CatalogError, match="did you mean h100"):
        catalog.gpu("h10")
    with pytest.raises(CatalogError, match="unknown SageMaker image engine 'tgi'"):
        catalog.sagemaker_image("tgi")


def test_catalog_loads_once_per_process():
    assert load_catalog() is load_catalog()

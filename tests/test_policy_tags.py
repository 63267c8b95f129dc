"""The required-tags policy on taggable AWS resources."""

from __future__ import annotations

from test_policy_support import aws_provider, resource_violations

TAGS = {"service": "chat-assistant", "environment": "prod", "owner": "ml-platform", "cost-center": "cc-4711"}
NODE_GROUP = "aws:eks/nodeGroup:NodeGroup"


def test_a_taggable_resource_with_every_required_tag_passes():
    assert resource_violations("required-tags", NODE_GROUP, {"tags": TAGS}) == []


def test_a_taggable_resource_missing_a_tag_is_flagged_with_the_missing_keys():
    tags = {k: v for k, v in TAGS.items() if k != "cost-center"}
    assert resource_violations("required-tags", NODE_GROUP, {"tags": tags}, name="gpu") == [
        "NodeGroup 'gpu' lacks the tag(s) cost-center needed for cost allocation and ownership; pass the blueprint's "
        "tags (service, environment, owner, cost-center) to every taggable resource"]


def test_a_taggable_resource_without_tags_lacks_them_all():
    assert resource_violations("required-tags", "aws:s3/bucket:Bucket", {}, name="b") == [
        "Bucket 'b' lacks the tag(s) service, environment, owner, cost-center needed for cost allocation and "
        "ownership; pass the blueprint's tags (service, environment, owner, cost-center) to every taggable resource"]


def test_the_providers_default_tags_count():
    provider = aws_provider(defaultTags={"tags": TAGS})
    assert resource_violations("required-tags", NODE_GROUP, {"tags": {"team": "x"}}, provider=provider) == []


def test_resources_that_take_no_tags_are_not_judged():
    assert resource_violations("required-tags", "aws:iam/rolePolicy:RolePolicy", {"policy": "{}"}) == []
    assert resource_violations("required-tags", "aws:lambda/function:Function", {"tags": TAGS}) == []


def test_the_required_keys_come_from_the_policy_config():
    assert resource_violations("required-tags", NODE_GROUP, {"tags": {"team": "x"}},
                               config={"requiredTags": ["team"]}) == []

"""Resource options shared by the components."""

from __future__ import annotations

import pulumi


def child_options(parent: pulumi.Resource, opts: pulumi.ResourceOptions | None) -> pulumi.ResourceOptions:
    """Options for a component's children: parented to it, and depending on what the component depends on.

    The engine does not pass a component's `depends_on` to its children's registrations; repeating it makes the
    ordering explicit (e.g. serving pods are created only after their EKS Pod Identity association exists).
    """
    depends = opts.depends_on if opts is not None else None
    if depends is not None and not isinstance(depends, list):
        depends = [depends]
    return pulumi.ResourceOptions(parent=parent, depends_on=depends or None)

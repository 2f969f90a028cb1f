"""Plugin registry: name -> module exposing PLUGIN_NAME and build(arguments).

A built plugin has ``on_session_open(session)`` that registers its hooks, as Volcano's
plugins do in OnSessionOpen (volcano-sh/volcano pkg/scheduler/plugins/factory.go), with what
it declares about them (``hooks.Declared``; a quota plugin also offers its per-queue figures,
``Session.add_queue_shares``). The session and the actions act on those declarations and never
on a plugin's name: the names live here and in the conf parser only.
"""

from scheduler.core.plugins import (
    binpack,
    capacity,
    cdp,
    conformance,
    drf,
    fairshare,
    gang,
    gpufrag,
    network_topology_aware,
    nodeorder,
    overcommit,
    predicates,
    priority,
    proportion,
    rescheduling,
)

PLUGINS = {
    module.PLUGIN_NAME: module
    for module in (
        priority,
        gang,
        conformance,
        drf,
        predicates,
        proportion,
        capacity,
        binpack,
        gpufrag,
        nodeorder,
        network_topology_aware,
        rescheduling,
        overcommit,
        fairshare,
        cdp,
    )
}

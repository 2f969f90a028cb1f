"""One colour per queue, from its id alone."""

from portal.common import palette


def test_a_queue_colour_depends_on_its_id_only():
    alone = palette.queue_colours([(3, "vision-train")])
    among_others = palette.queue_colours([(1, "a"), (2, "b"), (3, "vision-train"), (9, "z")])
    assert alone["vision-train"] == among_others["vision-train"] == palette.queue_colour(3)


def test_the_first_dozen_queues_all_differ_and_colours_repeat_after():
    colours = [palette.queue_colour(queue_id) for queue_id in range(1, 13)]
    assert len(set(colours)) == 12
    assert palette.queue_colour(13) == palette.queue_colour(1)


def test_non_queue_colours_are_never_queue_colours():
    others = {palette.FREE, palette.OTHER_TENANTS, palette.INK, palette.INK_MUTED}
    assert not others & set(palette.QUEUE_PALETTE)

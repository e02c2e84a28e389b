from baton.protocol.handoff import TaskState, WaitingOn
from tests.helpers import World


async def test_world_drives_a_task_into_every_state(world: World) -> None:
    for state in TaskState:
        task = await world.task_in(state)
        assert task.state is state
    paused = await world.task_in(TaskState.waiting, WaitingOn.human)
    assert paused.waiting_on is WaitingOn.human

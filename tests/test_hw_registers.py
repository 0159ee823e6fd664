"""The registers `setmaxnreg` trades between a warp-specialised kernel's producer and its compute warpgroups
(frontend/hw.py, no JAX): they must fit the CTA's launch allocation, or `setmaxnreg.inc` waits forever for
registers no warpgroup frees (a producer at 32 with two compute warpgroups hung on the H100, session 55)."""
import pytest

from mgpu_dsl.frontend import hw


@pytest.mark.parametrize("consumers", [1, 2, 3])
@pytest.mark.parametrize("producer", range(24, 257, 8))
def test_traded_registers_fit_the_launch_allocation_and_use_it(producer, consumers):
  threads = hw.WARPGROUP * (consumers + 1)
  launch = hw.launch_registers(threads) * threads
  got = hw.consumer_registers(consumers, producer)
  assert got % 8 == 0 and got <= hw.MAX_THREAD_REGISTERS
  assert hw.WARPGROUP * (producer + consumers * got) <= launch
  # and none is wasted: 8 more a compute thread would overflow the allocation or setmaxnreg's bound
  more = got + 8
  assert more > hw.MAX_THREAD_REGISTERS or hw.WARPGROUP * (producer + consumers * more) > launch


@pytest.mark.parametrize("producer, consumers, want", [
    (40, 2, 232), (40, 3, 152),     # the default producer (CUTLASS's)
    (24, 2, 240), (32, 3, 160),     # FlashAttention-3's pairs
    (32, 2, 232)])                  # not 240: the register file's share, which hung
def test_known_pairs(producer, consumers, want):
  assert hw.consumer_registers(consumers, producer) == want


def test_default_producer():
  assert hw.consumer_registers(2) == hw.consumer_registers(2, hw.PRODUCER_REGISTERS)

"""OTP ``rand``'s ``exs1024`` generator, seeded as ``rand:seed_s(exs1024, {A, B, C})``, and
``rand:uniform_s/1`` over it, bit for bit (OTP 25 ``rand.erl``)."""

from __future__ import annotations

_MASK64 = (1 << 64) - 1


class Exs1024:
    """OTP ``rand``'s ``exs1024`` (xorshift1024*), seeded as ``rand:seed_s(exs1024, {A, B, C})``."""

    def __init__(self, seed: tuple[int, int, int]) -> None:
        a1, a2, a3 = seed
        b1 = (((a1 & 0x1FFFFF) + 1) * 2097131) & 0x1FFFFF
        b2 = (((a2 & 0x1FFFFF) + 1) * 2097133) & 0x1FFFFF
        b3 = (((a3 & 0x1FFFFF) + 1) * 2097143) & 0x1FFFFF
        r = (b1 << 43) | (b2 << 22) | (b3 << 1) | 1
        words = []
        for _ in range(16):  # 16 words of xorshift64* from the seed, the last first
            r ^= r >> 12
            r ^= (r << 25) & _MASK64
            r ^= r >> 27
            words.append((r * 2685821657736338717) & _MASK64)
        words.reverse()
        self._state = words  # rand's {L, RL}: L then reversed RL
        self._p = 0

    def next(self) -> int:
        """The next 64-bit output."""
        state, p = self._state, self._p
        s0 = state[p]
        p = (p + 1) & 15
        s1 = state[p]
        s1 ^= (s1 << 31) & _MASK64
        s1 ^= s1 >> 11
        s0 ^= s0 >> 30
        state[p] = s0 ^ s1
        self._p = p
        return (state[p] * 1181783497276652981) & _MASK64

    def uniform(self) -> float:
        """``rand:uniform_s/1`` of OTP 25 for exs1024: ``V / (Max + 1)`` in floats."""
        return float(self.next()) / 18446744073709551616.0

// kwokStartRace: which kwok exits at start the kube tier meets by starting kwok again, and which fail the test.
import { describe, expect, it } from 'vitest';
import { kwokStartRace } from './kube-control-plane.ts';

// The shape of the crash a CI run met (Go's runtime report; the frames below it as that run's log showed them).
const stack = `goroutine 1 [running]:
github.com/wzshiming/easycel.getTypeValue({0x2889238, 0x25f8280})
	github.com/wzshiming/easycel@v0.6.0/types.go:48 +0x339
github.com/wzshiming/easycel.(*Registry).registerTraits(0x2670ef720420, {0x2854840, 0x0?})
	github.com/wzshiming/easycel@v0.6.0/registry.go:192 +0x7e
sigs.k8s.io/kwok/pkg/kwok/server.(*Server).initCEL(0x2670ef24e780)
	sigs.k8s.io/kwok@v0.8.0/pkg/kwok/server/metrics.go:39 +0x305`;

describe('kwokStartRace', () => {
  it("knows easycel's unlocked maps failing at kwok's start", () => {
    expect(kwokStartRace(`I1204 starting\nfatal error: concurrent map read and map write\n\n${stack}`)).toBe(true);
    expect(kwokStartRace(`fatal error: concurrent map writes\n\n${stack}`)).toBe(true);
  });

  it('leaves every other exit to fail the test', () => {
    expect(kwokStartRace('E1204 failed to install crd: connection refused')).toBe(false);
    expect(
      kwokStartRace(
        'fatal error: concurrent map writes\n\ngoroutine 7 [running]:\nsigs.k8s.io/kwok/pkg/kwok/controllers.x()',
      ),
    ).toBe(false);
    expect(kwokStartRace(`the log merely names github.com/wzshiming/easycel in a line`)).toBe(false);
  });
});

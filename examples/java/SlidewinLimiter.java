// The Python client's behaviour (clients/python, slidewin.Limiter) in plain
// Java over Spring Data Redis's StringRedisTemplate: the same Decision and
// headers, the local denial cache, the outage policy with its circuit
// breaker, and the FUNCTION-library fallback when the module is not loaded.
// Not compiled here (no Maven repository on this machine); kept in step with
// clients/python/slidewin/limiter.py and local.py.
//
// Timeouts: give the connection factory a command timeout (Lettuce:
// LettuceClientConfiguration.builder().commandTimeout(Duration.ofMillis(100)),
// Jedis: JedisClientConfiguration.builder().readTimeout(...)); a
// RedisConnectionFailureException or QueryTimeoutException then applies the
// outage policy.
package com.example.ratelimit;

import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;

import org.springframework.dao.DataAccessException;
import org.springframework.dao.QueryTimeoutException;
import org.springframework.data.redis.RedisConnectionFailureException;
import org.springframework.data.redis.core.RedisCallback;
import org.springframework.data.redis.core.StringRedisTemplate;

public class SlidewinLimiter {

    public enum Outage { DENY, ALLOW, LOCAL }

    /** What a check decided; source is redis, function, local-cache or fallback. */
    public record Decision(boolean allowed, long limit, long remaining, long retryAfterMs,
                           long resetAfterMs, List<byte[]> members, String source) {
        /** IETF RateLimit header fields, and Retry-After on a denial that can pass later. */
        public Map<String, String> headers() {
            Map<String, String> h = new LinkedHashMap<>();
            h.put("RateLimit-Limit", String.valueOf(limit));
            h.put("RateLimit-Remaining", String.valueOf(Math.max(0, remaining)));
            h.put("RateLimit-Reset", String.valueOf(seconds(resetAfterMs)));
            if (!allowed && retryAfterMs > 0) {
                h.put("Retry-After", String.valueOf(seconds(retryAfterMs)));
            }
            return h;
        }

        private static long seconds(long ms) {
            return Math.max(0, (ms + 999) / 1000);
        }
    }

    private final StringRedisTemplate redis;
    private final Outage outage;
    private final long pauseMs;
    private final int cacheSize;
    private final String libraryCode;
    private volatile boolean useFunction = false;

    // Denial cache: "key|limit|window" -> refused until (ms, monotonic). LRU-bounded.
    private final Map<String, Long> refusedUntil;
    // The LOCAL policy's exact per-instance windows: "key|limit|window" -> entry times.
    private final Map<String, ArrayList<Long>> localWindows;
    // Circuit breaker (failures to open = 1, like the Python default).
    private long openUntil = -1;
    private boolean probing = false;

    public SlidewinLimiter(StringRedisTemplate redis, Outage outage, long breakerPauseMs,
                           int cacheSize, Path slidewinLua) throws java.io.IOException {
        this.redis = redis;
        this.outage = outage;
        this.pauseMs = breakerPauseMs;
        this.cacheSize = cacheSize;
        this.libraryCode = Files.readString(slidewinLua); // lua/slidewin.lua
        this.refusedUntil = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, Long> e) {
                return size() > SlidewinLimiter.this.cacheSize;
            }
        };
        this.localWindows = new LinkedHashMap<>(16, 0.75f, true) {
            @Override
            protected boolean removeEldestEntry(Map.Entry<String, ArrayList<Long>> e) {
                return size() > 10_000;
            }
        };
    }

    private static long now() {
        return System.nanoTime() / 1_000_000;
    }

    private static byte[] b(Object o) {
        return String.valueOf(o).getBytes(StandardCharsets.UTF_8);
    }

    /** SLIDEWIN.CHECK key limit window_ms COST cost WITHMEMBERS, with the fast path and the policy. */
    public Decision check(String key, long limit, long windowMs, long cost) {
        String rule = key + "|" + limit + "|" + windowMs;
        synchronized (refusedUntil) {
            Long until = refusedUntil.get(rule);
            if (until != null && until > now()) {
                return new Decision(false, limit, 0, until - now(), until - now(), List.of(), "local-cache");
            }
        }
        if (!breakerAllows()) {
            return duringOutage(rule, limit, windowMs, cost);
        }
        List<Object> reply;
        try {
            reply = send(key, limit, windowMs, cost);
        } catch (RedisConnectionFailureException | QueryTimeoutException e) {
            breakerFailure();
            return duringOutage(rule, limit, windowMs, cost);
        }
        breakerSuccess();
        @SuppressWarnings("unchecked")
        List<byte[]> members = (List<byte[]>) reply.get(5);
        Decision d = new Decision((Long) reply.get(0) == 1, (Long) reply.get(1), (Long) reply.get(2),
                (Long) reply.get(3), (Long) reply.get(4), members, useFunction ? "function" : "redis");
        if (!d.allowed() && d.retryAfterMs() > 0 && cacheSize > 0) {
            synchronized (refusedUntil) {
                refusedUntil.put(rule, now() + d.retryAfterMs());
            }
        }
        return d;
    }

    @SuppressWarnings("unchecked")
    private List<Object> send(String key, long limit, long windowMs, long cost) {
        if (!useFunction) {
            try {
                return redis.execute((RedisCallback<List<Object>>) c -> (List<Object>) c.execute(
                        "SLIDEWIN.CHECK", b(key), b(limit), b(windowMs), b("COST"), b(cost), b("WITHMEMBERS")));
            } catch (DataAccessException e) {
                String text = String.valueOf(e.getMostSpecificCause().getMessage()).toLowerCase();
                if (!(text.contains("unknown command") && text.contains("slidewin"))) {
                    throw e; // WRONGTYPE, bad arguments: the caller's to fix
                }
                redis.execute((RedisCallback<Object>) c ->
                        c.execute("FUNCTION", b("LOAD"), b("REPLACE"), b(libraryCode)));
                useFunction = true;
            }
        }
        return redis.execute((RedisCallback<List<Object>>) c -> (List<Object>) c.execute(
                "FCALL", b("slidewin_check"), b(1), b(key), b(limit), b(windowMs), b("COST"), b(cost),
                b("WITHMEMBERS")));
    }

    /** SLIDEWIN.UNDO of an allowed decision's entries; clears this instance's denials of the key. */
    public long undo(String key, Decision d) {
        if (!d.allowed() || d.members().isEmpty()) {
            return 0;
        }
        synchronized (refusedUntil) {
            refusedUntil.keySet().removeIf(r -> r.startsWith(key + "|"));
        }
        List<byte[]> args = new ArrayList<>();
        if (useFunction) {
            args.add(b("slidewin_undo"));
            args.add(b(1));
        }
        args.add(b(key));
        args.addAll(d.members());
        String command = useFunction ? "FCALL" : "SLIDEWIN.UNDO";
        Long n = redis.execute((RedisCallback<Long>) c -> (Long) c.execute(command, args.toArray(new byte[0][])));
        return n == null ? 0 : n;
    }

    private Decision duringOutage(String rule, long limit, long windowMs, long cost) {
        switch (outage) {
            case ALLOW:
                return new Decision(true, limit, limit, 0, 0, List.of(), "fallback");
            case LOCAL: {
                long t = now();
                synchronized (localWindows) {
                    ArrayList<Long> log = localWindows.computeIfAbsent(rule, r -> new ArrayList<>());
                    log.removeIf(s -> s <= t - windowMs);
                    if (log.size() + cost <= limit) {
                        for (long i = 0; i < cost; i++) {
                            log.add(t);
                        }
                        return new Decision(true, limit, limit - log.size(), 0, 0, List.of(), "fallback");
                    }
                    if (cost > limit) {
                        return new Decision(false, limit, 0, -1, 0, List.of(), "fallback");
                    }
                    long oldest = log.get((int) (log.size() + cost - limit - 1));
                    long wait = Math.max(1, oldest + windowMs - t);
                    return new Decision(false, limit, 0, wait, wait, List.of(), "fallback");
                }
            }
            default:
                return new Decision(false, limit, 0, pauseMs, pauseMs, List.of(), "fallback");
        }
    }

    private synchronized boolean breakerAllows() {
        if (openUntil < 0) {
            return true;
        }
        if (now() < openUntil || probing) {
            return false;
        }
        probing = true; // one probe after the pause
        return true;
    }

    private synchronized void breakerSuccess() {
        openUntil = -1;
        probing = false;
    }

    private synchronized void breakerFailure() {
        probing = false;
        openUntil = now() + pauseMs;
    }
}

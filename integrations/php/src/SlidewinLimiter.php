<?php
/*
 * slidewin for Symfony's RateLimiter: a LimiterInterface whose consume()
 * is one SLIDEWIN.CHECK ... DETAIL on the server (php-redis), so the limit
 * holds exactly in every trailing window, for every PHP worker sharing the
 * server. Symfony's own sliding_window policy estimates the trailing window
 * from two fixed ones and can let more through (see README.md).
 *
 *   $factory = new SlidewinLimiterFactory($redis, [
 *       'id' => 'api', 'limit' => 100, 'interval' => '1 minute',
 *   ]);
 *   $limit = $factory->create($request->getClientIp())->consume();
 *   if (!$limit->isAccepted()) { ... 429, Retry-After from getRetryAfter() }
 */

namespace Slidewin\RateLimiter;

use Symfony\Component\RateLimiter\Exception\ReserveNotSupportedException;
use Symfony\Component\RateLimiter\LimiterInterface;
use Symfony\Component\RateLimiter\RateLimit;
use Symfony\Component\RateLimiter\Reservation;

final class SlidewinLimiter implements LimiterInterface
{
    /** Outage answers given so far in this process, by policy ('allow', 'deny'). */
    public static $outageAnswers = ['allow' => 0, 'deny' => 0];

    private $redis;
    private $key;
    private $limit;
    private $windowMs;
    private $shadow;
    private $outage;
    private $lastShadowRefused = false;

    /**
     * @param \Redis $redis    a connected php-redis client
     * @param string $key      the limiter key (one per client, user, ...)
     * @param int    $limit    the most tokens in any window
     * @param int    $windowMs the window in milliseconds
     * @param bool   $shadow   SHADOW: decide and count, never refuse
     * @param string $outage   when the server cannot answer: 'throw' the
     *                         \RedisException, or answer 'allow' (fail open)
     *                         or 'deny' (fail closed), counted and logged
     */
    public function __construct(\Redis $redis, string $key, int $limit, int $windowMs, bool $shadow = false, string $outage = 'throw')
    {
        if ($limit < 1 || $windowMs < 1) {
            throw new \InvalidArgumentException('limit and window must be positive');
        }
        if (!\in_array($outage, ['throw', 'allow', 'deny'], true)) {
            throw new \InvalidArgumentException("outage must be 'throw', 'allow' or 'deny'");
        }
        $this->redis = $redis;
        $this->key = $key;
        $this->limit = $limit;
        $this->windowMs = $windowMs;
        $this->shadow = $shadow;
        $this->outage = $outage;
    }

    /** Waiting for tokens is not offered: a sliding window has no queue. */
    public function reserve(int $tokens = 1, ?float $maxTime = null): Reservation
    {
        throw new ReserveNotSupportedException(__CLASS__);
    }

    /**
     * Takes $tokens if they fit in the trailing window (SLIDEWIN.CHECK ...
     * COST $tokens DETAIL); a refusal takes nothing. 0 tokens only looks
     * (SLIDEWIN.PEEK). With shadow, a refusal is accepted anyway and
     * wasShadowRefused() says so.
     */
    public function consume(int $tokens = 1): RateLimit
    {
        if ($tokens < 0 || $tokens > $this->limit) {
            throw new \InvalidArgumentException(sprintf('Cannot consume %d tokens: the limit is %d.', $tokens, $this->limit));
        }
        $this->lastShadowRefused = false;
        $args = $tokens === 0
            ? ['SLIDEWIN.PEEK', $this->key, $this->limit, $this->windowMs]
            : ['SLIDEWIN.CHECK', $this->key, $this->limit, $this->windowMs, 'COST', $tokens, 'DETAIL'];
        if ($tokens > 0 && $this->shadow) {
            $args[] = 'SHADOW';
        }
        try {
            $this->redis->clearLastError();
            $d = $this->redis->rawCommand(...$args);
        } catch (\RedisException $e) {
            return $this->outage($e->getMessage());
        }
        if (!\is_array($d) || \count($d) < 5) {
            // An error reply (the module not loaded, a wrong type, ...).
            $error = $this->redis->getLastError() ?: var_export($d, true);
            throw new \RuntimeException("slidewin: {$args[0]} failed: $error");
        }
        [$allowed, $limit, $remaining, $retryMs] = $d;
        $this->lastShadowRefused = $this->shadow && $tokens > 0 && (int) ($d[5] ?? 0) === 1;
        $now = new \DateTimeImmutable();
        $retryAfter = $retryMs > 0
            ? $now->modify(sprintf('+%d milliseconds', $retryMs))
            : $now;
        if ($retryMs < 0) {
            // Never fits (0 tokens look at an over-limit cost): a window away.
            $retryAfter = $now->modify(sprintf('+%d milliseconds', $this->windowMs));
        }
        return new RateLimit((int) $remaining, $retryAfter, $tokens === 0 ? true : (int) $allowed === 1, (int) $limit);
    }

    /** Whether the last consume() was refused by the limit and let through by SHADOW. */
    public function wasShadowRefused(): bool
    {
        return $this->lastShadowRefused;
    }

    /** Forgets every token taken: deletes the key. */
    public function reset(): void
    {
        $this->redis->del($this->key);
    }

    private function outage(string $why): RateLimit
    {
        if ($this->outage === 'throw') {
            throw new \RedisException("slidewin: the server did not answer: $why");
        }
        self::$outageAnswers[$this->outage]++;
        error_log(sprintf('slidewin: limiter unavailable, answering %s for %s: %s', $this->outage, $this->key, $why));
        $accepted = $this->outage === 'allow';
        return new RateLimit($accepted ? $this->limit : 0, new \DateTimeImmutable(), $accepted, $this->limit);
    }
}

<?php
/*
 * Makes SlidewinLimiters the way Symfony's RateLimiterFactory makes its
 * limiters: one configuration ('id', 'limit', 'interval' as Symfony writes
 * it, e.g. '1 minute', or 'window_ms'; 'shadow', 'outage'), create($key)
 * per client. The key is "<prefix><id>:<key>" (prefix 'rl:' by default).
 */

namespace Slidewin\RateLimiter;

use Symfony\Component\RateLimiter\LimiterInterface;

final class SlidewinLimiterFactory
{
    private $redis;
    private $config;

    public function __construct(\Redis $redis, array $config)
    {
        $config += ['prefix' => 'rl:', 'shadow' => false, 'outage' => 'throw'];
        if (!isset($config['id'], $config['limit'])) {
            throw new \InvalidArgumentException("the configuration needs 'id' and 'limit'");
        }
        if (!isset($config['window_ms'])) {
            if (!isset($config['interval'])) {
                throw new \InvalidArgumentException("the configuration needs 'interval' or 'window_ms'");
            }
            $now = new \DateTimeImmutable('@0');
            $end = $now->add(\DateInterval::createFromDateString($config['interval']));
            $config['window_ms'] = (int) round(((float) $end->format('U.u')) * 1000);
        }
        $this->redis = $redis;
        $this->config = $config;
    }

    public function create(?string $key = null): LimiterInterface
    {
        $c = $this->config;
        return new SlidewinLimiter($this->redis, $c['prefix'] . $c['id'] . ':' . ($key ?? ''),
            (int) $c['limit'], (int) $c['window_ms'], (bool) $c['shadow'], $c['outage']);
    }
}

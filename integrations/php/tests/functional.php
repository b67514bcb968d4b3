<?php
/*
 * The limiter's behaviour against a server with the module: accepted and
 * refused consumes, a refusal charging nothing, costs, a look with 0
 * tokens, reset, SHADOW, the factory's keys, and outages answered as
 * configured. Exits 1 on the first failed check.
 *
 *   php functional.php <port>
 */

require __DIR__ . '/../autoload.php';

use Slidewin\RateLimiter\SlidewinLimiter;
use Slidewin\RateLimiter\SlidewinLimiterFactory;
use Symfony\Component\RateLimiter\Exception\ReserveNotSupportedException;
use Symfony\Component\RateLimiter\LimiterInterface;

function check(bool $ok, string $what): void
{
    if (!$ok) {
        fwrite(STDERR, "FAILED: $what\n");
        exit(1);
    }
    echo "ok: $what\n";
}

[$_, $port] = $argv;
$redis = new Redis();
$redis->connect('127.0.0.1', (int) $port, 2.0);
$redis->flushAll();

$factory = new SlidewinLimiterFactory($redis, ['id' => 'api', 'limit' => 3, 'interval' => '1 minute']);
$limiter = $factory->create('203.0.113.7');
check($limiter instanceof LimiterInterface, 'a Symfony LimiterInterface');
for ($i = 1; $i <= 3; $i++) {
    $r = $limiter->consume();
    check($r->isAccepted() && $r->getRemainingTokens() === 3 - $i && $r->getLimit() === 3, "consume $i accepted, " . (3 - $i) . ' left');
}
$before = microtime(true);
$r = $limiter->consume();
$wait = (float) $r->getRetryAfter()->format('U.u') - $before;
check(!$r->isAccepted() && $r->getRemainingTokens() === 0, 'the 4th refused');
check($wait > 59 && $wait <= 60.1, "retry after about a minute ($wait s)");
check($redis->zCard('rl:api:203.0.113.7') === 3, 'the key rl:api:<ip> holds the 3 accepted, not the refusal');
$peek = $limiter->consume(0);
check($peek->isAccepted() && $peek->getRemainingTokens() === 0 && $redis->zCard('rl:api:203.0.113.7') === 3, '0 tokens looks and takes nothing');
try {
    $limiter->reserve();
    check(false, 'reserve() refused');
} catch (ReserveNotSupportedException $e) {
    check(true, 'reserve() is not supported (no queue)');
}
$limiter->reset();
check($redis->exists('rl:api:203.0.113.7') === 0, 'reset() deletes the key');

// Costs.
$big = new SlidewinLimiter($redis, 'rl:tokens', 10, 60000);
check($big->consume(6)->isAccepted() && !$big->consume(5)->isAccepted() && $big->consume(4)->isAccepted(), 'costs: 6 fit, then 5 not, 4 yes');
check($redis->zCard('rl:tokens') === 10, 'ten tokens taken');
try {
    $big->consume(11);
    check(false, 'more than the limit refused');
} catch (InvalidArgumentException $e) {
    check(true, 'more tokens than the limit: InvalidArgumentException');
}

// SHADOW: everything accepted, refusals reported and not charged.
$shadow = (new SlidewinLimiterFactory($redis, ['id' => 'beta', 'limit' => 2, 'window_ms' => 60000, 'shadow' => true]))->create('u1');
$flags = [];
for ($i = 0; $i < 5; $i++) {
    $r = $shadow->consume();
    check($r->isAccepted(), "shadow consume $i accepted");
    $flags[] = $shadow->wasShadowRefused();
}
check($flags === [false, false, true, true, true], 'wasShadowRefused() on the 3rd to 5th');
check($redis->zCard('rl:beta:u1') === 2, 'shadow refusals not charged');
$info = $redis->info('slidewin');
check((int) $info['slidewin_checks_shadow_refused'] === 3, 'INFO slidewin_checks_shadow_refused 3');

// Outages: the server stops answering (CLIENT PAUSE: the read times out),
// or drops the connection (CLIENT KILL).
$down = new Redis();
$down->connect('127.0.0.1', (int) $port, 1.0);
$down->setOption(Redis::OPT_READ_TIMEOUT, 0.2);
$down->setOption(Redis::OPT_MAX_RETRIES, 0);
$open = new SlidewinLimiter($down, 'rl:o', 1, 1000, false, 'allow');
$closed = new SlidewinLimiter($down, 'rl:c', 1, 1000, false, 'deny');
$throws = new SlidewinLimiter($down, 'rl:t', 1, 1000);
$redis->rawCommand('CLIENT', 'PAUSE', '1000', 'ALL');
check($open->consume()->isAccepted() && $open->consume()->isAccepted(), "outage 'allow': accepted");
check(!$closed->consume()->isAccepted(), "outage 'deny': refused");
try {
    $throws->consume();
    check(false, "outage 'throw' throws");
} catch (RedisException $e) {
    check(true, "outage 'throw': RedisException");
}
check(SlidewinLimiter::$outageAnswers === ['allow' => 2, 'deny' => 1], 'outage answers counted');
$redis->rawCommand('CLIENT', 'UNPAUSE');
// A dropped connection.
$gone = new Redis();
$gone->connect('127.0.0.1', (int) $port, 1.0);
$gone->setOption(Redis::OPT_MAX_RETRIES, 0);
$id = $gone->rawCommand('CLIENT', 'ID');
$redis->rawCommand('CLIENT', 'KILL', 'ID', (string) $id);
check(!(new SlidewinLimiter($gone, 'rl:g', 5, 1000, false, 'deny'))->consume()->isAccepted(), "a dropped connection: 'deny' refused");
check(SlidewinLimiter::$outageAnswers['deny'] === 2, 'counted');
echo "all passed\n";

<?php
/*
 * The same burst against slidewin's limiter and Symfony's own
 * sliding_window (SlidingWindowLimiter, in-memory storage), both limit 10
 * per second, in real time: one request on a whole second, then bursts of
 * 20 back-to-back requests 0.97 s, 1.02 s and 1.90 s after it (each
 * request meets both limiters, in the same order). Prints JSON: for each limiter the times
 * (ms) of the requests it admitted; slidewin's as the server scored them
 * (read from the key after each call, so client/server clock skew plays
 * no part), Symfony's as it read its clock (microtime) at the call.
 *
 *   php exactness.php <port>
 */

require __DIR__ . '/../autoload.php';

use Slidewin\RateLimiter\SlidewinLimiterFactory;
use Symfony\Component\RateLimiter\RateLimiterFactory;
use Symfony\Component\RateLimiter\Storage\InMemoryStorage;

// (seconds after a whole second of the clock, requests), back to back:
// the same schedule as integrations/ruby/test/exactness.rb.
const BURSTS = [[0.0, 1], [0.97, 20], [1.02, 20], [1.90, 20]];

$redis = new Redis();
$redis->connect('127.0.0.1', (int) $argv[1], 2.0);
$redis->del('rl:burst:x');
$slidewin = (new SlidewinLimiterFactory($redis, ['id' => 'burst', 'limit' => 10, 'interval' => '1 second']))->create('x');
$symfony = (new RateLimiterFactory(['id' => 'burst', 'policy' => 'sliding_window', 'limit' => 10, 'interval' => '1 second'],
    new InMemoryStorage()))->create('x');

$admitted = ['slidewin' => [], 'symfony' => []];
$seen = [];
$requests = 0;
// Start on a whole second of the clock (where a fixed window starts).
$start = ceil(microtime(true)) + 1;
foreach (BURSTS as [$at, $count]) {
    while (microtime(true) < $start + $at) {
        usleep(100);
    }
    for ($i = 0; $i < $count; $i++) {
        $requests++;
        $t = microtime(true);
        if ($symfony->consume()->isAccepted()) {
            $admitted['symfony'][] = $t * 1000;
        }
        if ($slidewin->consume()->isAccepted()) {
            // The entry this call added, with the server's time.
            foreach ($redis->zRange('rl:burst:x', 0, -1, true) as $member => $score) {
                $seen["$member@$score"] = $score;
            }
        }
    }
}
$admitted['slidewin'] = array_values($seen);
sort($admitted['slidewin']);
echo json_encode(['requests' => $requests, 'admitted' => $admitted]), "\n";

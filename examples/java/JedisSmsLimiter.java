// slidewin from plain Java with Jedis (redis.clients:jedis 5.x).
//
// SLIDEWIN.CHECK with DETAIL; a denial becomes HTTP 429 with Retry-After.
// On Redis Cluster use JedisCluster and a hash tag ({user:42}) in keys that
// one SLIDEWIN.MCHECK judges together.
import java.util.List;

import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.util.SafeEncoder;

public class JedisSmsLimiter {

    enum SlideWin implements ProtocolCommand {
        CHECK("SLIDEWIN.CHECK"), MCHECK("SLIDEWIN.MCHECK"), UNDO("SLIDEWIN.UNDO");

        private final byte[] raw;

        SlideWin(String name) {
            raw = SafeEncoder.encode(name);
        }

        @Override
        public byte[] getRaw() {
            return raw;
        }
    }

    /** Returns null when allowed, else the Retry-After value in seconds ("never" if it can never pass). */
    @SuppressWarnings("unchecked")
    static String retryAfter(JedisPooled jedis, String ip) {
        // [allowed, limit, remaining, retry_after_ms, reset_after_ms]
        List<Long> r = (List<Long>) jedis.sendCommand(SlideWin.CHECK, "sms:limit:" + ip, "5", "60000", "DETAIL");
        if (r.get(0) == 1L) {
            return null;
        }
        long ms = r.get(3);
        return ms < 0 ? "never" : String.valueOf((ms + 999) / 1000);
    }

    public static void main(String[] args) {
        try (JedisPooled jedis = new JedisPooled("127.0.0.1", 6379)) {
            for (int i = 0; i < 6; i++) {
                String retry = retryAfter(jedis, "203.0.113.7");
                System.out.println(retry == null ? "200" : "429 Retry-After: " + retry);
            }
        }
    }
}

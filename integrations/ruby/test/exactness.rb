# frozen_string_literal: true

# The same burst against the slidewin throttle and rack-attack's own
# (fixed window, Redis store), both 10 per second, in real time: one
# request on a whole second of the clock, then bursts of 20 back-to-back
# requests 0.97 s, 1.02 s and 1.90 s after it (the schedule of
# integrations/php/tests/exactness.php); each request meets both throttles.
# Prints JSON: the times (ms) of the requests each admitted, slidewin's as
# the server scored them (read from the key after each call), rack-attack's
# as read from the clock at the call.
#
#   SLIDEWIN_PORT=6379 ruby -Ilib test/exactness.rb

require "json"
require "rack/mock"
require "slidewin/rack_attack"

BURSTS = [[0.0, 1], [0.97, 20], [1.02, 20], [1.90, 20]].freeze

redis = Redis.new(host: "127.0.0.1", port: Integer(ENV.fetch("SLIDEWIN_PORT")), reconnect_attempts: 0)
redis.flushall
Rack::Attack.cache.store = redis
own = Rack::Attack::Throttle.new("own", limit: 10, period: 1) { |_req| "x" }
ours = Slidewin::RackAttack::Throttle.new("ours", limit: 10, period: 1, redis: redis) { |_req| "x" }

admitted = { "slidewin" => [], "rack_attack" => [] }
seen = {}
requests = 0
start = Time.now.to_f.ceil + 1
BURSTS.each do |at, count|
  sleep 0.0001 while Time.now.to_f < start + at
  count.times do
    requests += 1
    t = Time.now.to_f
    admitted["rack_attack"] << t * 1000 unless own.matched_by?(Rack::Attack::Request.new(Rack::MockRequest.env_for("/")))
    next if ours.matched_by?(Rack::Attack::Request.new(Rack::MockRequest.env_for("/")))

    redis.zrange("rl:rack:ours:x", 0, -1, with_scores: true).each { |m, s| seen["#{m}@#{s}"] = s }
  end
end
admitted["slidewin"] = seen.values.sort
puts JSON.generate("requests" => requests, "admitted" => admitted)

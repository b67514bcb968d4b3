# frozen_string_literal: true

# The slidewin throttle in Rack::Attack, through Rack::MockRequest, against
# a server with the module on SLIDEWIN_PORT.
#
#   SLIDEWIN_PORT=6379 ruby -Ilib test/test_rack_attack.rb

require "minitest/autorun"
require "rack"
require "rack/mock"
require "slidewin/rack_attack"

PORT = Integer(ENV.fetch("SLIDEWIN_PORT"))

class SlidewinRackAttackTest < Minitest::Test
  def setup
    @redis = Redis.new(host: "127.0.0.1", port: PORT, reconnect_attempts: 0)
    @redis.flushall
    @redis.call(%w[SLIDEWIN.TOP RESET]) # node-wide, like INFO: read as deltas below
    @info = @redis.info("slidewin")
    Rack::Attack.clear_configuration
    Rack::Attack.enabled = true
    Rack::Attack.throttled_responder = Slidewin::RackAttack::RESPONDER
    Slidewin::RackAttack.reset_counters!
    @app = Rack::Attack.new(->(_env) { [200, { "content-type" => "text/plain" }, ["ok\n"]] })
  end

  def stat_delta(field)
    @redis.info("slidewin")[field].to_i - @info[field].to_i
  end

  def get(path = "/", ip: "203.0.113.7")
    Rack::MockRequest.new(@app).get(path, "REMOTE_ADDR" => ip)
  end

  def test_throttles_with_headers_and_does_not_charge_refusals
    Slidewin::RackAttack.throttle("api/ip", limit: 3, period: 60, redis: @redis) { |req| req.ip }
    3.times { assert_equal 200, get.status }
    4.times do
      r = get
      assert_equal 429, r.status
      assert_includes 59..60, Integer(r.headers["retry-after"])
      assert_equal "3", r.headers["ratelimit-limit"]
      assert_equal "0", r.headers["ratelimit-remaining"]
    end
    assert_equal 3, @redis.zcard("rl:rack:api/ip:203.0.113.7"), "refusals are not charged"
    assert_equal 200, get(ip: "198.51.100.1").status, "another client has its own window"
    assert_equal 4, stat_delta("slidewin_checks_denied")
  end

  def test_shadow_never_throttles_and_reports
    Slidewin::RackAttack.throttle("beta", limit: 2, period: 60, redis: @redis, shadow: true) { |req| req.ip }
    flags = Array.new(5) do
      env = Rack::MockRequest.env_for("/", "REMOTE_ADDR" => "203.0.113.7")
      status, = @app.call(env)
      assert_equal 200, status
      env["slidewin.shadow_refused"]
    end
    assert_equal [nil, nil, "beta", "beta", "beta"], flags
    assert_equal 2, @redis.zcard("rl:rack:beta:203.0.113.7")
    assert_equal 3, Slidewin::RackAttack.counters[:shadow_refused]
    assert_equal 3, stat_delta("slidewin_checks_shadow_refused")
    top = @redis.call(%w[SLIDEWIN.TOP DENIED])
    assert_equal [["rl:rack:beta:203.0.113.7", 3, 0]], top
  end

  def test_period_in_milliseconds_slides
    Slidewin::RackAttack.throttle("fast", limit: 2, period_ms: 300, redis: @redis) { |_req| "all" }
    assert_equal [200, 200, 429], Array.new(3) { get.status }
    sleep 0.35
    assert_equal [200, 200, 429], Array.new(3) { get.status }
  end

  def test_outage_answers_as_configured
    slow = Redis.new(host: "127.0.0.1", port: PORT, reconnect_attempts: 0, read_timeout: 0.2)
    slow.ping
    Slidewin::RackAttack.throttle("open", limit: 1, period: 60, redis: slow) { |req| req.path == "/open" && req.ip }
    Slidewin::RackAttack.throttle("closed", limit: 1, period: 60, redis: slow, outage: :deny) do |req|
      req.path == "/closed" && req.ip
    end
    @redis.call(%w[CLIENT PAUSE 1500 ALL])
    _, err = capture_io do
      assert_equal 200, get("/open").status
      r = get("/closed")
      assert_equal 429, r.status
      assert_nil r.headers["retry-after"]
    end
    assert_equal({ outage_allow: 1, outage_deny: 1 }, Slidewin::RackAttack.counters)
    assert_match(/limiter unavailable, answering allow/, err)
    assert_match(/limiter unavailable, answering deny/, err)
  ensure
    @redis.call(%w[CLIENT UNPAUSE])
  end
end

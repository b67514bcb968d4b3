<?php
// Loads Debian's Symfony RateLimiter (php-symfony-rate-limiter) and this
// integration; with Composer, its autoloader does both instead.
require_once '/usr/share/php/Symfony/Component/RateLimiter/autoload.php';
require_once __DIR__ . '/src/SlidewinLimiter.php';
require_once __DIR__ . '/src/SlidewinLimiterFactory.php';

SELECT c.country,
       COUNT(*) AS customers,
       SUM(EXISTS (SELECT 1 FROM orders o WHERE o.customer_id = c.id AND o.status = 'paid')) AS buyers
FROM customers c
GROUP BY c.country
ORDER BY c.country;
